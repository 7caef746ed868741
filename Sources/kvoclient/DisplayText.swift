import KVOJSON

/// Text from the server made safe to print: object ids, key paths, reasons, expressions, messages and
/// JSON values can hold control characters that would forge output lines (`"evil\nroot"` reads as two
/// ids), move the cursor or recolour the terminal (ESC sequences), ring the bell or hide text (NUL,
/// bidirectional overrides).
///
/// Every human-readable line kvoclient prints goes through one of these; JSON output stays valid JSON
/// of the same value. Pure functions; any thread.
enum DisplayText {
    /// Plain text with every control and reordering character escaped (`PrintableText`: `\n`, `\\`,
    /// `\u{1B}`), not cut: an id or key path is printed whole.
    static func plain(_ text: String) -> String {
        PrintableText.isPlain(text) ? text : PrintableText.escaped(text, limit: .max)
    }

    /// A JSON value as compact JSON. The JSON writer escapes C0 controls; DEL, the C1 controls, U+2028,
    /// U+2029 and the bidirectional controls (which only occur inside strings) are written as `\uXXXX`
    /// here, so the line is still valid JSON of the same value and shows no raw control character.
    static func json(_ value: JSONValue) -> String {
        let text = value.description
        guard text.utf8.contains(where: { $0 >= 0x7F }) else { return text }
        var result = ""
        result.reserveCapacity(text.utf8.count + 16)
        // The JSON writer has escaped the C0 controls already; the rest of `PrintableText`'s set remains.
        for scalar in text.unicodeScalars {
            if PrintableText.isControl(scalar) {
                let hex = String(scalar.value, radix: 16)
                result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    /// A JSON value that is a string, unquoted and escaped; anything else as `json`.
    static func text(_ value: JSONValue) -> String {
        value.stringValue.map(plain) ?? json(value)
    }
}
