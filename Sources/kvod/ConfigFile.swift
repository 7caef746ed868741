import KVOJSON
#if canImport(Glibc)
import Glibc
#endif

/// A kvod config file (`--config FILE`), read: one setting a line, named as kvod's flag without the dashes.
///
///     # kvod.conf
///     host = 0.0.0.0
///     port = 7420
///     log-level = "debug"
///     in-memory = true
///     http-allowed-origin = ["https://a.example", "https://b.example"]
///
/// A value is a bare word (no spaces, no `#`), a JSON string in double quotes (its escapes), a JSON number, or,
/// for a repeatable flag, a JSON array of those (or the line repeated). Flags take `true` or `false`. `#` starts a
/// comment, blank lines are skipped. The file only says which names and values it holds; whether they are
/// kvod's and valid is `ConfigurationLayers`' and ArgumentParser's business. A value; parsed once per read.
struct ConfigFile {
    /// One `name = value` line.
    struct Entry {
        let key: String
        /// The value's text (a JSON string unquoted; a number, `true` or `false` as written), or a list's.
        let values: [String]
        /// Written as a `[…]` list.
        let isList: Bool
        let line: Int
    }

    let path: String
    let entries: [Entry]

    /// Largest file read: a config file is a few hundred lines.
    static let maximumBytes = 1 << 20

    /// Reads and parses the file at `path`.
    init(path: String) throws(ConfigurationError) {
        try self.init(path: path, text: ConfigFile.read(path))
    }

    /// Parses `text` as the file `path`.
    init(path: String, text: [UInt8]) throws(ConfigurationError) {
        self.path = path
        guard let decoded = String(validating: text, as: UTF8.self) else {
            throw .unreadable(path: path, reason: "not UTF-8 text")
        }
        var entries: [Entry] = []
        for (index, rawLine) in decoded.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            if let entry = try ConfigFile.entry(Substring(rawLine), line: index + 1, path: path) { entries.append(entry) }
        }
        self.entries = entries
    }

    private static func entry(_ rawLine: Substring, line: Int, path: String) throws(ConfigurationError) -> Entry? {
        let text = trimmed(rawLine)
        if text.isEmpty || text.hasPrefix("#") { return nil }
        guard let equals = text.firstIndex(of: "=") else {
            throw .syntax(path: path, line: line, problem: "expected 'name = value', got '\(PrintableText.escaped(String(text), limit: 80))'")
        }
        let key = String(trimmed(text[..<equals]))
        guard !key.isEmpty, key.utf8.allSatisfy({ isNameByte($0) }) else {
            throw .syntax(path: path, line: line, problem: "'\(PrintableText.escaped(key, limit: 80))' is no setting name (a flag's name without the leading --, e.g. max-connections)")
        }
        let rest = trimmed(text[text.index(after: equals)...])
        let (value, remainder) = try splitValue(rest, line: line, path: path, key: key)
        let after = trimmed(remainder)
        guard after.isEmpty || after.hasPrefix("#") else {
            throw .syntax(path: path, line: line, problem: "\(key): unexpected '\(PrintableText.escaped(String(after), limit: 80))' after the value (quote a value holding spaces or '#')")
        }
        return Entry(key: key, values: value.values, isList: value.isList, line: line)
    }

    /// The value at the start of `text`, and what follows it.
    private static func splitValue(_ text: Substring, line: Int, path: String, key: String)
        throws(ConfigurationError) -> (value: (values: [String], isList: Bool), remainder: Substring)
    {
        guard let first = text.first else {
            throw .syntax(path: path, line: line, problem: "\(key): no value after '='")
        }
        if first == "\"" || first == "[" {
            let end = closingIndex(of: text)
            guard let end else {
                throw .syntax(path: path, line: line, problem: "\(key): unterminated \(first == "[" ? "list" : "string")")
            }
            let json = text[...end]
            let parsed: JSONValue
            do {
                parsed = try JSONParser.parse(String(json))
            } catch {
                throw .syntax(path: path, line: line, problem: "\(key): \(PrintableText.escaped(String(json), limit: 80)) is not a valid JSON \(first == "[" ? "list" : "string"): \(error)")
            }
            let remainder = text[text.index(after: end)...]
            if case let .array(items) = parsed {
                var values: [String] = []
                for item in items {
                    guard let scalar = scalarText(item) else {
                        throw .syntax(path: path, line: line, problem: "\(key): a list holds strings, numbers or booleans, not a \(item.typeName)")
                    }
                    values.append(scalar)
                }
                return ((values, true), remainder)
            }
            return (([scalarText(parsed) ?? ""], false), remainder)
        }
        // A bare word: up to a comment.
        let end = text.firstIndex(of: "#") ?? text.endIndex
        let word = trimmed(text[..<end])
        if word.contains(where: { $0 == " " || $0 == "\t" }) {
            throw .syntax(path: path, line: line, problem: "\(key): quote a value holding spaces (\"…\")")
        }
        if word.isEmpty { throw .syntax(path: path, line: line, problem: "\(key): no value after '='") }
        return (([String(word)], false), text[end...])
    }

    /// The index of the `"` or `]` that closes the string or list `text` starts with (strings inside a list
    /// and escapes skipped); nil when it is not closed.
    private static func closingIndex(of text: Substring) -> Substring.Index? {
        var inString = false
        var escaped = false
        var index = text.startIndex
        let isList = text.first == "["
        while index < text.endIndex {
            let character = text[index]
            if inString {
                if escaped {
                    escaped = false
                } else if character == "\\" {
                    escaped = true
                } else if character == "\"" {
                    inString = false
                    if !isList { return index }
                }
            } else if character == "\"" {
                inString = true
            } else if character == "]", isList {
                return index
            }
            index = text.index(after: index)
        }
        return nil
    }

    /// A scalar's text: a string as it is, a number or boolean as JSON writes it.
    private static func scalarText(_ value: JSONValue) -> String? {
        switch value {
        case let .string(text): return text
        case .int, .double, .bool: return JSONWriter.string(value)
        case .null, .array, .object: return nil
        }
    }

    private static func isNameByte(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
            || byte == UInt8(ascii: "-") || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) || byte == UInt8(ascii: "_")
    }

    private static func trimmed(_ text: Substring) -> Substring {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" }
        guard let start = text.firstIndex(where: { !isSpace($0) }) else { return text[text.endIndex...] }
        let end = text.lastIndex(where: { !isSpace($0) })!
        return text[start...end]
    }

    /// The file's bytes (at most `maximumBytes`).
    private static func read(_ path: String) throws(ConfigurationError) -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw .unreadable(path: path, reason: String(cString: strerror(errno))) }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = Glibc.read(descriptor, &chunk, chunk.count)
            if count < 0 {
                if errno == EINTR { continue }
                throw .unreadable(path: path, reason: String(cString: strerror(errno)))
            }
            if count == 0 { return bytes }
            bytes.append(contentsOf: chunk[0..<count])
            if bytes.count > maximumBytes { throw .unreadable(path: path, reason: "larger than \(maximumBytes) bytes") }
        }
    }
}
