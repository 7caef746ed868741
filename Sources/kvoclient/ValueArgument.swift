import ArgumentParser
import KVOJSON

/// How a command-line value becomes a JSON value.
///
/// The argument is parsed as JSON when it is valid JSON (`42`, `true`, `null`, `"text"`, `[1,2]`,
/// `{"a":1}`), and otherwise taken as a plain string, so `2026-11-21` and `'"2026-11-21"'` both mean
/// the string `"2026-11-21"`. Quote a value as JSON to force a string that looks like another type:
/// `'"42"'`, `'"true"'`.
///
/// An argument that looks like JSON but is not valid JSON by kvod's rules (the same parser, so the
/// same nesting and number limits) is a usage error, not a string: one that starts with `{`, `[` or
/// `"`, and one written as a JSON number that is out of range (`1e400`, or an integer past 64 bits). Otherwise `1e400` or
/// `'[1e400]'` would silently be stored as the strings "1e400" and "[1e400]". Pure functions; any thread.
enum ValueArgument {
    /// The JSON value an argument stands for; throws a usage error naming the argument when it looks
    /// like JSON but does not parse.
    static func parse(_ text: String) throws(ValidationError) -> JSONValue {
        let parseError: JSONParseError
        do {
            return try JSONParser.parse(text, wideIntegers: .refused)
        } catch {
            parseError = error
        }
        guard looksLikeJSON(text) else { return .string(text) }
        let shown = PrintableText.escaped(text, limit: 80)
        if case .integerOutOfRange = parseError.reason {
            throw ValidationError("""
                the value '\(shown)' is an integer outside the 64-bit range (kvod keeps integers exact, never rounded): \
                write it with an exponent (such as 1e19) for a double, or quote it as JSON ('\"\(shown)\"') to store it as a string
                """)
        }
        if isJSONNumber(trimmed(text)) {
            throw ValidationError("the value '\(shown)' is a number out of range: quote it as JSON ('\"\(shown)\"') to store it as a string")
        }
        throw ValidationError(
            "the value '\(shown)' looks like JSON but is not valid JSON (\(parseError)): fix it, or quote it as a JSON string to store it as text")
    }

    /// True for text that starts (after JSON whitespace) with `{`, `[` or `"`, or that is written as a
    /// JSON number.
    static func looksLikeJSON(_ text: String) -> Bool {
        let body = trimmed(text)
        guard let first = body.first else { return false }
        return first == UInt8(ascii: "{") || first == UInt8(ascii: "[") || first == UInt8(ascii: "\"") || isJSONNumber(body)
    }

    /// The UTF-8 of `text` without leading and trailing JSON whitespace.
    private static func trimmed(_ text: String) -> ArraySlice<UInt8> {
        let bytes = Array(text.utf8)
        let isSpace = { (byte: UInt8) in byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }
        guard let start = bytes.firstIndex(where: { !isSpace($0) }), let end = bytes.lastIndex(where: { !isSpace($0) }) else {
            return []
        }
        return bytes[start...end]
    }

    /// RFC 8259's number grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    private static func isJSONNumber(_ bytes: ArraySlice<UInt8>) -> Bool {
        var index = bytes.startIndex
        func digits() -> Int {
            let start = index
            while index < bytes.endIndex, (0x30...0x39).contains(bytes[index]) { index += 1 }
            return index - start
        }
        if index < bytes.endIndex, bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.endIndex else { return false }
        if bytes[index] == UInt8(ascii: "0") { index += 1 } else if digits() == 0 { return false }
        if index < bytes.endIndex, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard digits() > 0 else { return false }
        }
        if index < bytes.endIndex, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.endIndex, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard digits() > 0 else { return false }
        }
        return index == bytes.endIndex
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
