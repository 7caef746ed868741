/// kvod's numeric flags (`--port`, `--max-line`, `--max-output-buffer`, `--max-connections`,
/// `--history`, `--history-bytes`), parsed with a message that says what is wrong.
///
/// ArgumentParser takes `-1` for an option name, so `--port -1` would say "Missing value for '--port
/// <port>'": the options are declared with `parsing: .unconditional` and one of these as their
/// `transform`, so that `-1` gets "must be 0 or more". Pure functions; any thread. (kvoclient has its
/// own, with its argument kinds.)
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

    /// A number of seconds, 0 or more (fractions allowed).
    static func seconds(_ text: String) throws(Invalid) -> Double {
        guard let value = Double(text), value.isFinite else {
            throw Invalid(description: "must be a number of seconds, 0 or more")
        }
        guard value >= 0 else { throw Invalid(description: "must be 0 or more") }
        return value
    }

    /// A port to listen on, 0...65535 (0: any free port).
    static func port(_ text: String) throws(Invalid) -> Int {
        let value = try nonNegative(text)
        guard value <= 65535 else { throw Invalid(description: "must be between 0 and 65535") }
        return value
    }
}
