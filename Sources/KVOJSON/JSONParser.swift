#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A strict RFC 8259 parser over UTF-8 bytes.
///
/// It reads one complete value (surrounding white space allowed) and rejects trailing bytes,
/// invalid UTF-8 anywhere, lone surrogate escapes and nesting deeper than `maximumDepth`, so that no
/// input can crash the caller or exhaust its stack. A parser is a short-lived value: make one per
/// input, on any thread.
///
/// Values and containers are read here; strings (`JSONParser+Strings`), numbers (`JSONParser+Numbers`), the key
/// table (`JSONParser+KeyTable`) and the member scan that builds no values (`JSONParser+Scanning`) in their files.
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
}
