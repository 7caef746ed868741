/// Numbers given on kvod's and kvoclient's command lines (kvod's `--port`, `--max-*` and `--history*`
/// flags; kvoclient's `--port`, `--index`, `--count`, `--heartbeat`, `--limit`, the indexes of `remove`
/// and `replace`, the id of `unbind`), parsed with a message that says what is wrong.
///
/// ArgumentParser takes `-1` for an option name: `--port -1` would say "Missing value for '--port
/// <port>'" and `remove t a -1` "Missing expected argument". So numeric options are declared with
/// `parsing: .unconditional` (the next word is the value, whatever it looks like) and one of these as
/// their `transform`, and numeric arguments are captured as `.allUnrecognized` words and parsed here:
/// `-1` then gets "must be 0 or more". Pure functions; any thread.
public enum NumberArgument {
    /// Why a word is not an acceptable number; ArgumentParser shows it after "The value '…' is invalid
    /// for '<option>'".
    public struct Invalid: Error, CustomStringConvertible {
        public let description: String

        public init(description: String) {
            self.description = description
        }
    }

    /// A whole number, 0 or more.
    public static func nonNegative(_ text: String) throws(Invalid) -> Int {
        guard let value = Int(text) else {
            if text.hasPrefix("-"), Double(text) != nil { throw Invalid(description: "must be 0 or more") }
            throw Invalid(description: "must be a whole number, 0 or more")
        }
        guard value >= 0 else { throw Invalid(description: "must be 0 or more") }
        return value
    }

    /// A whole number, 1 or more.
    public static func positive(_ text: String) throws(Invalid) -> Int {
        if text.hasPrefix("-"), Double(text) != nil { throw Invalid(description: "must be 1 or more") }
        let value = try nonNegative(text)
        guard value >= 1 else { throw Invalid(description: "must be 1 or more") }
        return value
    }

    /// A TCP port to connect to, 1...65535.
    public static func port(_ text: String) throws(Invalid) -> Int {
        let value = try nonNegative(text)
        guard (1...65535).contains(value) else { throw Invalid(description: "must be between 1 and 65535") }
        return value
    }

    /// A TCP port to listen on, 0...65535 (0: any free port, which kvod then prints).
    public static func listeningPort(_ text: String) throws(Invalid) -> Int {
        let value = try nonNegative(text)
        guard value <= 65535 else { throw Invalid(description: "must be between 0 and 65535") }
        return value
    }

    /// A number of seconds, 0 or more (fractions allowed).
    public static func seconds(_ text: String) throws(Invalid) -> Double {
        guard let value = Double(text), value.isFinite else {
            throw Invalid(description: "must be a number of seconds, 0 or more")
        }
        guard value >= 0 else { throw Invalid(description: "must be 0 or more") }
        return value
    }

    /// A number of milliseconds, 0 or more (fractions allowed).
    public static func milliseconds(_ text: String) throws(Invalid) -> Double {
        guard let value = Double(text), value.isFinite else {
            throw Invalid(description: "must be a number of milliseconds, 0 or more")
        }
        guard value >= 0 else { throw Invalid(description: "must be 0 or more") }
        return value
    }

    /// An array index in a positional argument (`remove t items 0 2`), named for the message:
    /// "index '-1' must be 0 or more".
    public static func index(_ text: String) throws(Invalid) -> Int64 {
        do {
            return Int64(try nonNegative(text))
        } catch {
            throw Invalid(description: "index '\(text)' \(error.description)")
        }
    }
}
