#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reading a JSON object's members without building their values (issue 28): the request decoder checks a
/// whole line as strictly as `JSONParser.parse` does, then decodes only the fields its operation reads, and a
/// `set`'s value not at all when the request carried it in canonical form.
extension JSONParser {
    /// One member of a top-level object as `scanMembers` finds it: its name and where its value's text is.
    /// The value is valid JSON (checked) but not built.
    public struct MemberText {
        /// The member's name: one of the `KeyTable`'s strings when it is one (nothing allocated).
        public let key: String
        /// Where the value's text is in the scanned bytes.
        public let range: Range<Int>
        /// Whether those bytes are exactly what `JSONWriter.write` makes of the value (as `Member.compactText`).
        public let isCompact: Bool
        /// The name's index in the list given to the `KeyTable`'s `init` when the table holds it; -1 otherwise
        /// (no table, a name of more than eight bytes, an escaped name, or one the table does not know).
        public let keyIndex: Int
    }

    /// Checks that `bytes` hold exactly one JSON value, accepting and rejecting exactly what `parse` does
    /// (the error thrown is the one `parse` throws), and when that value is an object returns its members in
    /// order, each with where its value's text is, without building any value; nil when the value is valid
    /// JSON but not an object. Keys found in `keys` are that table's strings.
    public static func scanMembers(_ bytes: UnsafeBufferPointer<UInt8>, keys: KeyTable? = nil,
                                   wideIntegers: WideIntegers = .nearestDouble) throws(JSONParseError) -> [MemberText]? {
        var parser = JSONParser(bytes: bytes, keys: keys, wideIntegers: wideIntegers)
        do throws(JSONParseError) {
            parser.skipWhitespace()
            guard parser.index < bytes.count, bytes[parser.index] == UInt8(ascii: "{") else {
                _ = try parse(bytes, wideIntegers: wideIntegers)  // reports the syntax error, if any
                return nil
            }
            let members = try parser.scanMemberList()
            parser.skipWhitespace()
            if parser.index != bytes.count {
                throw parser.unexpected("unexpected data after the JSON value")
            }
            return members
        } catch {
            // An integer past 64 bits: the scan's own error names the field it is in.
            if case .integerOutOfRange = error.reason { throw error }
            // The scan rejects exactly what `parse` rejects; `parse` says why in its own words (rare: bad input).
            _ = try parse(bytes, wideIntegers: wideIntegers)
            throw error
        }
    }

    /// The top-level object's members (at `{`), as `forEachMember(topLevel: true)` reads them.
    private mutating func scanMemberList() throws(JSONParseError) -> [MemberText] {
        try enterContainer()
        index += 1  // {
        var members: [MemberText] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return members
        }
        members.reserveCapacity(8)
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                throw unexpected("expected a string key")
            }
            let key: String
            var keyIndex = -1
            if let keys, let known = knownKeyEntry(in: keys) { (key, keyIndex) = known } else { key = try parseString() }
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw unexpected("expected ':'") }
            index += 1
            skipWhitespace()
            compact = true
            let valueStart = index
            do throws(JSONParseError) {
                try skipValue()
            } catch {
                // An integer past 64 bits is refused naming the request's field it is in.
                guard case let .integerOutOfRange(literal, nil) = error.reason else { throw error }
                throw JSONParseError(reason: .integerOutOfRange(literal: literal, field: key), offset: error.offset)
            }
            members.append(MemberText(key: key, range: valueStart..<index, isCompact: compact, keyIndex: keyIndex))
            skipWhitespace()
            guard index < bytes.count else { throw error(.syntax("unexpected end of input in an object")) }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "}") {
                index += 1
                depth -= 1
                return members
            }
            throw unexpected("expected ',' or '}'")
        }
    }

    /// `parseValue` without the value: the same checks and errors, and the same effect on `compact`.
    mutating func skipValue() throws(JSONParseError) {
        guard index < bytes.count else { throw error(.syntax("unexpected end of input")) }
        switch bytes[index] {
        case UInt8(ascii: "{"): try skipObject()
        case UInt8(ascii: "["): try skipArray()
        case UInt8(ascii: "\""): _ = try skipString()
        case UInt8(ascii: "t"): try expectLiteral("true")
        case UInt8(ascii: "f"): try expectLiteral("false")
        case UInt8(ascii: "n"): try expectLiteral("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): _ = try parseNumber(needsValue: false)  // allocates nothing
        case 0x80...0xFF:
            if validUTF8SequenceLength(at: index) == nil { throw error(.invalidUTF8) }
            throw error(.syntax("unexpected character"))
        default:
            throw error(.syntax("unexpected character '\(Character(Unicode.Scalar(bytes[index])))'"))
        }
    }

    /// A nested object, as `forEachMember` reads one below the top level: keys must come in ascending order
    /// (`String <`) for the value to stay compact.
    private mutating func skipObject() throws(JSONParseError) {
        try enterContainer()
        index += 1  // {
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return
        }
        var previousKey: Range<Int>?
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                throw unexpected("expected a string key")
            }
            let key = try skipString()
            // `JSONWriter` writes keys sorted: the text is compact only if they came that way.
            if compact {
                if let previousKey, !keyText(previousKey, precedes: key) { compact = false }
                previousKey = key
            }
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw unexpected("expected ':'") }
            index += 1
            skipWhitespace()
            try skipValue()
            skipWhitespace()
            guard index < bytes.count else { throw error(.syntax("unexpected end of input in an object")) }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "}") {
                index += 1
                depth -= 1
                return
            }
            throw unexpected("expected ',' or '}'")
        }
    }

    /// Whether the key whose (escape-free) text is at `left` sorts before the one at `right` as `String <`
    /// orders them: byte by byte when both are ASCII, else as strings (canonical equivalence).
    private func keyText(_ left: Range<Int>, precedes right: Range<Int>) -> Bool {
        let leftBytes = UnsafeBufferPointer(rebasing: bytes[left])
        let rightBytes = UnsafeBufferPointer(rebasing: bytes[right])
        if !leftBytes.contains(where: { $0 >= 0x80 }) && !rightBytes.contains(where: { $0 >= 0x80 }) {
            return leftBytes.lexicographicallyPrecedes(rightBytes)
        }
        return String(decoding: leftBytes, as: UTF8.self) < String(decoding: rightBytes, as: UTF8.self)
    }

    private mutating func skipArray() throws(JSONParseError) {
        try enterContainer()
        index += 1  // [
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return
        }
        while true {
            skipWhitespace()
            try skipValue()
            skipWhitespace()
            guard index < bytes.count else { throw error(.syntax("unexpected end of input in an array")) }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "]") {
                index += 1
                depth -= 1
                return
            }
            throw unexpected("expected ',' or ']'")
        }
    }

    /// `parseString` without the string: the same checks and errors; an escape makes the value not compact.
    /// Returns where the string's text (between the quotes) is.
    private mutating func skipString() throws(JSONParseError) -> Range<Int> {
        index += 1  // opening quote
        let start = index
        while index < bytes.count {
            if index + 8 <= bytes.count {
                // Eight bytes at once, to the first one that is not plain ASCII.
                let special = ByteScan.firstSpecialByte(ByteScan.littleEndianWord(at: bytes.baseAddress! + index))
                index += special
                if special == 8 { continue }
            }
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return start..<(index - 1)
            case UInt8(ascii: "\\"):
                compact = false
                index += 1
                guard index < bytes.count else { throw error(.syntax("unterminated escape")) }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                     UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    break
                case UInt8(ascii: "u"):
                    _ = try parseUnicodeEscape()
                default:
                    index -= 1
                    throw error(.syntax("invalid escape"))
                }
            default:
                if byte < 0x20 { throw error(.syntax("control character in a string")) }
                if byte < 0x80 {
                    index += 1
                } else {
                    guard let length = validUTF8SequenceLength(at: index) else { throw error(.invalidUTF8) }
                    index += length
                }
            }
        }
        throw error(.syntax("unterminated string"))
    }
}
