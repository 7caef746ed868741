/// Numbers given on the command line (`--port`, `--index`, `--count`, `--heartbeat`, the indexes of
/// `remove` and `replace`, the id of `unbind`), parsed with a message that says what is wrong.
///
/// ArgumentParser takes `-1` for an option name: `--port -1` would say "Missing value for '--port
/// <port>'" and `remove t a -1` "Missing expected argument". So numeric options are declared with
/// `parsing: .unconditional` (the next word is the value, whatever it looks like) and one of these as
/// their `transform`, and numeric arguments are captured as `.allUnrecognized` words and parsed here:
/// `-1` then gets "must be 0 or more". Pure functions; any thread.
enum NumberArgument {
    /// Why a word is not an acceptable number; ArgumentParser shows it after "The value '…' is invalid
    /// for '<option>'".
    struct Invalid: Error, CustomStringConvertible {
        let description: String
    }

    /// A whole number, 0 or more.
    static func nonNegative(_ text: String) throws(Invalid) -> Int {
        guard let value = Int(text) else {
            if text.hasPrefix("-"), Double(text) != nil { throw Invalid(description: "must be 0 or more") }
            throw Invalid(description: "must be a whole number, 0 or more")
        }
        guard value >= 0 else { throw Invalid(description: "must be 0 or more") }
        return value
    }

    /// A whole number, 1 or more.
    static func positive(_ text: String) throws(Invalid) -> Int {
        if text.hasPrefix("-"), Double(text) != nil { throw Invalid(description: "must be 1 or more") }
        let value = try nonNegative(text)
        guard value >= 1 else { throw Invalid(description: "must be 1 or more") }
        return value
    }

    /// A TCP port to connect to, 1...65535.
    static func port(_ text: String) throws(Invalid) -> Int {
        let value = try nonNegative(text)
        guard (1...65535).contains(value) else { throw Invalid(description: "must be between 1 and 65535") }
        return value
    }

    /// A number of seconds, 0 or more (fractions allowed).
    static func seconds(_ text: String) throws(Invalid) -> Double {
        guard let value = Double(text), value.isFinite else {
            throw Invalid(description: "must be a number of seconds, 0 or more")
        }
        guard value >= 0 else { throw Invalid(description: "must be 0 or more") }
        return value
    }

    /// An array index in a positional argument (`remove t items 0 2`), named for the message:
    /// "index '-1' must be 0 or more".
    static func index(_ text: String) throws(Invalid) -> Int64 {
        do {
            return Int64(try nonNegative(text))
        } catch {
            throw Invalid(description: "index '\(text)' \(error.description)")
        }
    }
}
