#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a byte sequence is not a JSON value.
public struct JSONParseError: Error, Equatable, CustomStringConvertible {
    public enum Reason: Equatable, Sendable {
        /// The bytes are not valid UTF-8.
        case invalidUTF8
        /// Nesting deeper than `JSONParser.maximumDepth`.
        case tooDeep
        /// An integer literal (no fraction, no exponent) outside the 64-bit range: integers are kept exact or
        /// refused, never rounded to a double (docs/protocol.md, "Numbers"). `field` is the top-level member
        /// it was found in, when the scan of a request's members knows it.
        case integerOutOfRange(literal: String, field: String?)
        /// Anything else: the message says what was expected.
        case syntax(String)
    }

    public let reason: Reason
    /// Byte offset where the problem was found.
    public let offset: Int

    public var description: String {
        switch reason {
        case .invalidUTF8: return "invalid UTF-8 at byte \(offset)"
        case .tooDeep: return "nesting deeper than \(JSONParser.maximumDepth) levels at byte \(offset)"
        case let .integerOutOfRange(literal, field):
            let prefix = field.map { "'\($0)': " } ?? ""
            return """
                \(prefix)the integer \(literal) is outside the 64-bit range (-9223372036854775808 to \
                9223372036854775807) at byte \(offset); integers are kept exact, never rounded: write a fraction \
                or an exponent (such as 1e19) to send a double
                """
        case let .syntax(message): return "\(message) at byte \(offset)"
        }
    }
}

/// A strict RFC 8259 parser over UTF-8 bytes.
///
/// It reads one complete value (surrounding white space allowed) and rejects trailing bytes,
/// invalid UTF-8 anywhere, lone surrogate escapes and nesting deeper than `maximumDepth`, so that no
/// input can crash the caller or exhaust its stack. A parser is a short-lived value: make one per
/// input, on any thread.
public struct JSONParser {
    /// Deepest array/object nesting accepted.
    public static let maximumDepth = 256

    /// One member of an object, as `parseMembers` gives it. A struct rather than a tuple: an array of
    /// tuples is destroyed through the runtime's generic tuple witness, element by element.
    public struct Member {
        public let key: String
        public let value: JSONValue
        /// Where the value's text sits in the input when those bytes are exactly what
        /// `JSONWriter.write(value)` produces (no white space, object keys in strictly ascending order,
        /// no escapes in strings, numbers only as integers in their shortest form); nil otherwise.
        /// A caller that keeps these bytes need not encode the value again.
        public let compactText: Range<Int>?
    }

    /// Object keys the parser hands back as given strings instead of building a new `String` for
    /// each: for the fixed names of a protocol's messages (`op`, `id`, `object`, …), which every line
    /// repeats. Only names of at most eight bytes are kept; a key is looked up when it has at most
    /// eight bytes and no escape, by its bytes packed into one word, in a small open-addressed table (a
    /// multiply, a shift and usually one comparison, against some 180 instructions to build a `String`).
    /// Immutable; any thread. A class: the parser passes it along by one reference count, not one per array.
    public final class KeyTable: Sendable {
        /// Slot `i` holds a name's word (first byte lowest; 0 for an empty slot: a name has no NUL) and its
        /// position in `names` (the names kept, in the order given).
        private let words: [UInt64]
        private let positions: [Int]
        private let names: [String]
        /// For each name kept, its index in the list given to `init`.
        private let given: [Int]
        /// log2 of the slot count.
        private let bits: Int

        public init(_ names: [String]) {
            let kept = names.indices.filter { !names[$0].isEmpty && names[$0].utf8.count <= 8 && !names[$0].utf8.contains(0) }
            let short = kept.map { names[$0] }
            self.names = short
            given = kept
            var bits = 4
            while 1 << bits < 4 * short.count { bits += 1 }
            self.bits = bits
            var words = [UInt64](repeating: 0, count: 1 << bits)
            var positions = [Int](repeating: 0, count: 1 << bits)
            for (position, name) in short.enumerated() {
                let word = name.utf8.enumerated().reduce(UInt64(0)) { $0 | UInt64($1.element) << (8 * UInt64($1.offset)) }
                var slot = KeyTable.slot(of: word, bits: bits)
                while words[slot] != 0 && words[slot] != word { slot = (slot + 1) & ((1 << bits) - 1) }
                words[slot] = word
                positions[slot] = position
            }
            self.words = words
            self.positions = positions
        }

        @inline(__always)
        private static func slot(of word: UInt64, bits: Int) -> Int {
            Int(truncatingIfNeeded: (word &* 0x9E37_79B9_7F4A_7C15) >> UInt64(64 - bits))
        }

        /// The name whose bytes packed into a word (first byte lowest, the rest zero) are `word`, if there is one.
        func name(word: UInt64) -> String? {
            position(word: word).map { names[$0] }
        }

        /// The name whose bytes packed into a word are `word` and its index in the list given to `init`, if there is one.
        func entry(word: UInt64) -> (name: String, index: Int)? {
            position(word: word).map { (names[$0], given[$0]) }
        }

        /// Where the name spelled by `text` is in the list given to `init`, if the table kept it (names of at
        /// most eight bytes); no `String` is made.
        public func index(of text: UnsafeBufferPointer<UInt8>) -> Int? {
            guard !text.isEmpty, text.count <= 8 else { return nil }
            var word: UInt64 = 0
            for (offset, byte) in text.enumerated() {
                if byte == 0 { return nil }
                word |= UInt64(byte) << (8 * UInt64(offset))
            }
            return position(word: word).map { given[$0] }
        }

        private func position(word: UInt64) -> Int? {
            let mask = (1 << bits) - 1
            var slot = KeyTable.slot(of: word, bits: bits)
            while true {
                let stored = words[slot]
                if stored == word { return positions[slot] }
                if stored == 0 { return nil }
                slot = (slot + 1) & mask
            }
        }
    }

    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0
    var depth = 0
    /// Keys of the top-level object to take from here (`parseMembers(_:keys:)`).
    let keys: KeyTable?
    /// False once the value being read (a top-level member's, see `Member.compactText`) contains
    /// anything `JSONWriter` would write differently: white space, an escape, a key not after the
    /// previous one, a non-integral number or `-0`.
    var compact = true
    /// What an integer literal outside `Int64` becomes.
    let wideIntegers: WideIntegers

    /// What the parser makes of an integer literal outside `Int64`.
    public enum WideIntegers: Sendable {
        /// Refused with `integerOutOfRange`, never rounded: what kvod reads from its clients (requests, and
        /// kvoclient's value arguments; docs/protocol.md, "Numbers").
        case refused
        /// The nearest double, as JSON parsers commonly read it: JSON from other programs (NATS's API and
        /// monitoring replies carry unsigned 64-bit counters), files, and replies kvod wrote itself.
        case nearestDouble
    }

    init(bytes: UnsafeBufferPointer<UInt8>, keys: KeyTable? = nil, wideIntegers: WideIntegers = .nearestDouble) {
        self.bytes = bytes
        self.keys = keys
        self.wideIntegers = wideIntegers
    }

    /// Parses exactly one JSON value from `bytes`.
    public static func parse(_ bytes: UnsafeBufferPointer<UInt8>,
                             wideIntegers: WideIntegers = .nearestDouble) throws(JSONParseError) -> JSONValue {
        var parser = JSONParser(bytes: bytes, wideIntegers: wideIntegers)
        parser.skipWhitespace()
        let value = try parser.parseValue()
        parser.skipWhitespace()
        if parser.index != bytes.count {
            throw parser.unexpected("unexpected data after the JSON value")
        }
        return value
    }

    /// Parses exactly one JSON object and returns its members in order, without building a
    /// dictionary (no hashing): for small objects read once, such as requests. Returns nil when the
    /// value is valid JSON but not an object. Its keys found in `keys` are that table's strings.
    public static func parseMembers(_ bytes: UnsafeBufferPointer<UInt8>, keys: KeyTable? = nil,
                                    wideIntegers: WideIntegers = .nearestDouble) throws(JSONParseError) -> [Member]? {
        var parser = JSONParser(bytes: bytes, keys: keys, wideIntegers: wideIntegers)
        parser.skipWhitespace()
        guard parser.index < bytes.count, bytes[parser.index] == UInt8(ascii: "{") else {
            _ = try parse(bytes, wideIntegers: wideIntegers)  // reports the syntax error, if any
            return nil
        }
        let members = try parser.parseMemberList()
        parser.skipWhitespace()
        if parser.index != bytes.count {
            throw parser.unexpected("unexpected data after the JSON value")
        }
        return members
    }

    /// Parses exactly one JSON value from a byte array.
    public static func parse(_ bytes: [UInt8], wideIntegers: WideIntegers = .nearestDouble) throws(JSONParseError) -> JSONValue {
        let result: Result<JSONValue, JSONParseError> = bytes.withUnsafeBufferPointer { buffer in
            do throws(JSONParseError) { return .success(try parse(buffer, wideIntegers: wideIntegers)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Parses exactly one JSON value from text.
    public static func parse(_ text: String, wideIntegers: WideIntegers = .nearestDouble) throws(JSONParseError) -> JSONValue {
        try parse(Array(text.utf8), wideIntegers: wideIntegers)
    }

    // MARK: - Values

    func error(_ reason: JSONParseError.Reason) -> JSONParseError {
        JSONParseError(reason: reason, offset: index)
    }

    /// The error for an unexpected byte where structure was expected: `.invalidUTF8` when the byte
    /// starts no valid UTF-8 sequence, else a syntax error with `message`.
    func unexpected(_ message: String) -> JSONParseError {
        if index < bytes.count, bytes[index] >= 0x80, validUTF8SequenceLength(at: index) == nil {
            return error(.invalidUTF8)
        }
        return error(.syntax(message))
    }

    /// Skips white space (usually none: one test); skipping any makes the value being read not compact.
    @inline(__always)
    mutating func skipWhitespace() {
        guard index < bytes.count, bytes[index] <= 0x20 else { return }
        skipWhitespaceRun()
    }

    private mutating func skipWhitespaceRun() {
        let start = index
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default:
                if index != start { compact = false }
                return
            }
        }
        if index != start { compact = false }
    }

    private mutating func parseValue() throws(JSONParseError) -> JSONValue {
        guard index < bytes.count else { throw error(.syntax("unexpected end of input")) }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        case 0x80...0xFF:
            // Bytes outside ASCII can only be valid inside strings; say which problem it is.
            if validUTF8SequenceLength(at: index) == nil { throw error(.invalidUTF8) }
            throw error(.syntax("unexpected character"))
        default:
            throw error(.syntax("unexpected character '\(Character(Unicode.Scalar(bytes[index])))'"))
        }
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let count = literal.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw error(.syntax("invalid literal")) }
        let start = literal.utf8Start
        for offset in 0..<count where bytes[index + offset] != start[offset] {
            throw error(.syntax("invalid literal"))
        }
        index += count
    }

    mutating func enterContainer() throws(JSONParseError) {
        depth += 1
        if depth > JSONParser.maximumDepth { throw error(.tooDeep) }
    }

    /// Members an object collects on the stack before its dictionary is made (`parseObject`).
    private static let stackedMembers = 16
    /// Objects nested deeper than this grow their dictionaries as they read, so that the stacked members
    /// (512 bytes per object) take at most 4 KiB of stack however deep the input nests.
    private static let stackedDepth = 8

    /// Reads an object. Its first `stackedMembers` members are collected on the stack and the dictionary
    /// is then made once at its final size, instead of growing from empty (capacity 1, 3, 6, 12: each
    /// step a new table and every key hashed again); a larger object grows from there.
    private mutating func parseObject() throws(JSONParseError) -> JSONValue {
        guard depth < JSONParser.stackedDepth else {
            var members: [String: JSONValue] = [:]
            try forEachMember { key, value, _ in members[key] = value }
            return .object(members)
        }
        let result: Result<[String: JSONValue], JSONParseError> = withUnsafeTemporaryAllocation(
            of: (key: String, value: JSONValue).self, capacity: JSONParser.stackedMembers
        ) { stack in
            var stacked = 0
            var members: [String: JSONValue]?
            // Whatever is still on the stack when reading fails (moved-out members are not).
            defer { (stack.baseAddress!).deinitialize(count: stacked) }
            do throws(JSONParseError) {
                try forEachMember { key, value, _ in
                    if members != nil {
                        members![key] = value
                    } else if stacked < stack.count {
                        (stack.baseAddress! + stacked).initialize(to: (key, value))
                        stacked += 1
                    } else {
                        var grown = [String: JSONValue](minimumCapacity: 2 * stack.count)
                        for index in 0..<stacked {
                            let member = (stack.baseAddress! + index).move()
                            grown[member.key] = member.value
                        }
                        stacked = 0
                        grown[key] = value
                        members = grown
                    }
                }
            } catch {
                return .failure(error)
            }
            if let members { return .success(members) }
            // In order, so that a repeated key keeps its last value.
            var built = [String: JSONValue](minimumCapacity: stacked)
            for index in 0..<stacked {
                let member = (stack.baseAddress! + index).move()
                built[member.key] = member.value
            }
            stacked = 0
            return .success(built)
        }
        return .object(try result.get())
    }

    /// An object's members in order (the top-level object of `parseMembers`), each with its value's
    /// compact text when it has one.
    private mutating func parseMemberList() throws(JSONParseError) -> [Member] {
        var members: [Member] = []
        members.reserveCapacity(8)
        try forEachMember(keys: keys, topLevel: true) { key, value, text in
            members.append(Member(key: key, value: value, compactText: text))
        }
        return members
    }

    /// Reads an object (at `{`), handing each member to `body` in order; keys found in `keys` are
    /// its strings. At the top level (`parseMembers`) each value's compact text range goes along
    /// (nil when it has none); below it, members must come in ascending key order for the value
    /// they belong to to stay compact, and `body` gets nil.
    private mutating func forEachMember(keys: KeyTable? = nil, topLevel: Bool = false,
                                        _ body: (String, JSONValue, Range<Int>?) -> Void) throws(JSONParseError) {
        try enterContainer()
        index += 1  // {
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return
        }
        var previousKey: String?
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                throw unexpected("expected a string key")
            }
            let key: String
            if let keys, let known = knownKey(in: keys) { key = known } else { key = try parseString() }
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw unexpected("expected ':'") }
            index += 1
            skipWhitespace()
            if topLevel {
                compact = true
                let valueStart = index
                let value: JSONValue
                do throws(JSONParseError) {
                    value = try parseValue()
                } catch {
                    // An integer past 64 bits is refused naming the member it is in (as `scanMembers` does).
                    guard case let .integerOutOfRange(literal, nil) = error.reason else { throw error }
                    throw JSONParseError(reason: .integerOutOfRange(literal: literal, field: key), offset: error.offset)
                }
                body(key, value, compact ? valueStart..<index : nil)
            } else {
                // `JSONWriter` writes keys sorted: the text is compact only if they came that way.
                if compact {
                    if let previousKey, !(previousKey < key) { compact = false }
                    previousKey = key
                }
                body(key, try parseValue(), nil)
            }
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

    private mutating func parseArray() throws(JSONParseError) -> JSONValue {
        try enterContainer()
        index += 1  // [
        var elements: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try parseValue())
            skipWhitespace()
            guard index < bytes.count else { throw error(.syntax("unexpected end of input in an array")) }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "]") {
                index += 1
                depth -= 1
                return .array(elements)
            }
            throw unexpected("expected ',' or ']'")
        }
    }

    // MARK: - Strings

    /// Length of the valid UTF-8 sequence starting at `position` (within the input), or nil
    /// (`ByteScan.utf8SequenceLength`).
    func validUTF8SequenceLength(at position: Int) -> Int? {
        ByteScan.utf8SequenceLength(bytes.baseAddress!, count: bytes.count, at: position)
    }

    /// At a string's opening quote: when the string is at most eight bytes of plain ASCII (no
    /// escape, no control character) and one of `table`'s names, that name, with the string consumed;
    /// otherwise nil, with nothing consumed.
    mutating func knownKey(in table: KeyTable) -> String? {
        knownKeyEntry(in: table)?.name
    }

    /// `knownKey`, with the name's index in the list given to the table's `init`.
    mutating func knownKeyEntry(in table: KeyTable) -> (name: String, index: Int)? {
        let start = index + 1
        let length: Int
        var word: UInt64
        if start + 8 <= bytes.count {
            // Eight bytes at once: where the first quote (or anything else special) is.
            word = ByteScan.littleEndianWord(at: bytes.baseAddress! + start)
            let special = ByteScan.firstSpecialByte(word)
            if special == 8 {
                guard start + 8 < bytes.count, bytes[start + 8] == UInt8(ascii: "\"") else { return nil }
                length = 8
            } else {
                guard bytes[start + special] == UInt8(ascii: "\"") else { return nil }
                length = special
                word &= (1 << UInt64(8 * length)) - 1
            }
        } else {
            // Near the end of the input: byte by byte.
            var end = start
            word = 0
            while true {
                guard end < bytes.count, end - start <= 8 else { return nil }
                let byte = bytes[end]
                if byte == UInt8(ascii: "\"") { break }
                guard byte >= 0x20, byte < 0x80, byte != UInt8(ascii: "\\"), end - start < 8 else { return nil }
                word |= UInt64(byte) << (8 * UInt64(end - start))
                end += 1
            }
            length = end - start
        }
        guard length > 0, let entry = table.entry(word: word) else { return nil }
        index = start + length + 1
        return entry
    }

    mutating func parseString() throws(JSONParseError) -> String {
        index += 1  // opening quote
        let start = index
        // Fast path: no escapes, so the string is a slice of the input. Eight bytes that are all
        // plain ASCII (no quote, backslash, control character or byte above 0x7F) are skipped at once;
        // otherwise the next (up to) eight are looked at one by one.
        scan: while index < bytes.count {
            if index + 8 <= bytes.count, case let word = ByteScan.word(at: bytes.baseAddress! + index),
               !ByteScan.needsEscaping(word), !ByteScan.hasNonASCII(word) {
                index += 8
                continue
            }
            let end = min(index + 8, bytes.count)
            while index < end {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    let slice = UnsafeBufferPointer(rebasing: bytes[start..<index])
                    index += 1
                    return String(decoding: slice, as: UTF8.self)
                }
                if byte == UInt8(ascii: "\\") { break scan }
                if byte < 0x20 { throw error(.syntax("control character in a string")) }
                if byte < 0x80 {
                    index += 1
                } else {
                    guard let length = validUTF8SequenceLength(at: index) else { throw error(.invalidUTF8) }
                    index += length
                }
            }
        }
        guard index < bytes.count else { throw error(.syntax("unterminated string")) }
        // Slow path: copy what we have, then decode escapes (which `JSONWriter` may write otherwise).
        compact = false
        var scratch = Array(UnsafeBufferPointer(rebasing: bytes[start..<index]))
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return String(decoding: scratch, as: UTF8.self)
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { throw error(.syntax("unterminated escape")) }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""): scratch.append(0x22)
                case UInt8(ascii: "\\"): scratch.append(0x5C)
                case UInt8(ascii: "/"): scratch.append(0x2F)
                case UInt8(ascii: "b"): scratch.append(0x08)
                case UInt8(ascii: "f"): scratch.append(0x0C)
                case UInt8(ascii: "n"): scratch.append(0x0A)
                case UInt8(ascii: "r"): scratch.append(0x0D)
                case UInt8(ascii: "t"): scratch.append(0x09)
                case UInt8(ascii: "u"):
                    let scalar = try parseUnicodeEscape()
                    appendUTF8(scalar, to: &scratch)
                default:
                    index -= 1
                    throw error(.syntax("invalid escape"))
                }
            default:
                if byte < 0x20 { throw error(.syntax("control character in a string")) }
                if byte < 0x80 {
                    scratch.append(byte)
                    index += 1
                } else {
                    guard let length = validUTF8SequenceLength(at: index) else { throw error(.invalidUTF8) }
                    scratch.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[index..<(index + length)]))
                    index += length
                }
            }
        }
        throw error(.syntax("unterminated string"))
    }

    mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw error(.syntax("truncated \\u escape")) }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw error(.syntax("invalid \\u escape"))
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    mutating func parseUnicodeEscape() throws(JSONParseError) -> Unicode.Scalar {
        let first = try parseHex4()
        if first >= 0xD800, first <= 0xDBFF {
            guard index + 2 <= bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
            else { throw error(.syntax("lone surrogate in \\u escape")) }
            index += 2
            let second = try parseHex4()
            guard second >= 0xDC00, second <= 0xDFFF else { throw error(.syntax("lone surrogate in \\u escape")) }
            let combined = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
            return Unicode.Scalar(combined)!
        }
        guard let scalar = Unicode.Scalar(first) else { throw error(.syntax("lone surrogate in \\u escape")) }
        return scalar
    }

    private func appendUTF8(_ scalar: Unicode.Scalar, to buffer: inout [UInt8]) {
        UTF8.encode(scalar) { buffer.append($0) }
    }
}
