import KVOJSON

/// How a command-line value becomes a JSON value.
///
/// The argument is parsed as JSON when it is valid JSON (`42`, `true`, `null`, `"text"`, `[1,2]`,
/// `{"a":1}`), and otherwise taken as a plain string, so `2026-11-21` and `'"2026-11-21"'` both mean
/// the string `"2026-11-21"`. Quote a value as JSON to force a string that looks like another type:
/// `'"42"'`, `'"true"'`.
enum ValueArgument {
    /// The JSON value an argument stands for.
    static func parse(_ text: String) -> JSONValue {
        (try? JSONParser.parse(text)) ?? .string(text)
    }

    /// Value arguments captured as `allUnrecognized` (so that `-1.5` is a value, not an option),
    /// without the first `--` terminator: `set o k -- --port` stores the string `"--port"`, and
    /// `set o k --` has no value (a usage error); `set o k -- --` stores `"--"`.
    static func droppingTerminator(_ arguments: [String]) -> [String] {
        guard let terminator = arguments.firstIndex(of: "--") else { return arguments }
        var result = arguments
        result.remove(at: terminator)
        return result
    }
}
