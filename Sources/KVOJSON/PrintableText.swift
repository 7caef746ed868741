/// Makes text that came from a client safe to show to a person: in a log line, a terminal, an error
/// message.
///
/// Client-supplied text (object ids, key paths, values) may hold control characters that forge log lines
/// (`"evil\nroot"`), move a terminal's cursor or change its colours (ESC sequences), ring its bell or cut a
/// C string short (NUL); and it may be megabytes long. `PrintableText` escapes every control character
/// (C0, DEL and C1, plus the Unicode line and paragraph separators and the bidirectional overrides that
/// reorder what a reader sees) and cuts long text to a bounded prefix that states the full length.
///
/// Pure functions: any thread may call them.
public enum PrintableText {
    /// How many characters of a value an error message or log line shows by default.
    public static let defaultLimit = 200

    /// `text` with every control or invisible-reordering character escaped (`\n`, `\t`, `\r`, `\\`, and
    /// `\u{1B}` style for the rest), cut after `limit` characters of the original text with a suffix that
    /// gives the original length in bytes: `…(1048576 bytes)`.
    ///
    /// A backslash is doubled, so an escaped text can never be mistaken for one that holds the escape's
    /// characters literally.
    public static func escaped(_ text: String, limit: Int = defaultLimit) -> String {
        var result = ""
        result.reserveCapacity(min(text.utf8.count, limit) + 8)
        var shown = 0
        for scalar in text.unicodeScalars {
            if shown == limit {
                result += "…(\(text.utf8.count) bytes)"
                return result
            }
            shown += 1
            switch scalar {
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case "\\": result += "\\\\"
            default:
                if isControl(scalar) {
                    result += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
                } else {
                    result.unicodeScalars.append(scalar)
                }
            }
        }
        return result
    }

    /// Whether `text` can be shown as it is (no character that `escaped` would change; length not checked).
    public static func isPlain(_ text: String) -> Bool {
        for scalar in text.unicodeScalars where scalar == "\\" || isControl(scalar) { return false }
        return true
    }

    /// Whether `text` holds a character `escaped` would write as an escape, a backslash aside: text that
    /// was escaped at its source (its backslashes doubled) has none.
    public static func containsControlCharacters(_ text: String) -> Bool {
        text.unicodeScalars.contains(where: isControl)
    }

    /// The characters shown escaped: C0 controls, DEL, C1 controls, U+2028/U+2029 and the bidirectional
    /// embedding, override and isolate characters (U+202A–U+202E, U+2066–U+2069).
    public static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069: return true
        default: return false
        }
    }
}
