/// Recognises JSON text that is exactly what `JSONWriter` writes for some object, without building a
/// value: for the store's loader, which keeps such text as it is (packed) instead of decoding it.
///
/// The check is conservative: `true` means the text parses (`JSONParser.parse`) to an object and
/// `JSONWriter` writes that object back as these very bytes; `false` means only that the fast scan did
/// not prove it, and the caller must parse the text (which reports any error) and encode the value
/// again. Besides every invalid text, `false` for what the scan does not follow although `JSONWriter`
/// may write it: escapes in strings, non-ASCII object keys, numbers that are not integers of at most 18
/// digits (`-0` included), and nesting deeper than `maximumDepth`. Keys must be in strictly increasing
/// byte order (ASCII keys compare as Swift `String`s do, the order `JSONWriter` sorts them in), so a
/// duplicate key is `false` too. Stateless; any thread.
public enum CanonicalObjectScan {
    /// Deepest nesting the scan follows (an object or array is one level, as `JSONParser` counts).
    public static let maximumDepth = 64

    /// What a successful scan counted in the text, for a caller that derives a figure of the decoded value
    /// from the text without decoding it (e.g. the engine's estimated size of a value).
    public struct Counts: Equatable, Sendable {
        /// Objects and arrays with at least one member or element.
        public var nonEmptyContainers = 0
        /// `null` and `true` literals (`false` is not counted).
        public var nullsAndTrues = 0
        /// Integers, and the bytes of their text (sign included).
        public var integers = 0
        public var integerBytes = 0

        public init() {}
    }

    /// Whether `bytes` is `JSONWriter`'s encoding of an object (see the type's note: `false` may also
    /// mean "not proven").
    public static func isCanonicalObject(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        scanObject(bytes) != nil
    }

    /// The counts of `bytes` when it is `JSONWriter`'s encoding of an object; nil when the scan does not prove
    /// it (as `isCanonicalObject`).
    public static func scanObject(_ bytes: UnsafeBufferPointer<UInt8>) -> Counts? {
        guard let base = bytes.baseAddress, bytes.count >= 2, base[0] == UInt8(ascii: "{") else { return nil }
        var scanner = Scanner(bytes: base, count: bytes.count)
        guard scanner.value(), scanner.index == bytes.count else { return nil }
        return scanner.counts
    }

    /// Whether `bytes` is `JSONWriter`'s encoding of an object (see the type's note).
    public static func isCanonicalObject(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBufferPointer { isCanonicalObject($0) }
    }

    /// One pass over the text; every method returns false as soon as the text leaves the canonical form.
    private struct Scanner {
        let bytes: UnsafePointer<UInt8>
        let count: Int
        var index = 0
        var depth = 0
        var counts = Counts()

        init(bytes: UnsafePointer<UInt8>, count: Int) {
            self.bytes = bytes
            self.count = count
        }

        /// The byte at `index`, or 0 (never valid where a byte is expected) past the end.
        private func peek() -> UInt8 {
            index < count ? bytes[index] : 0
        }

        mutating func value() -> Bool {
            switch peek() {
            case UInt8(ascii: "{"): return object()
            case UInt8(ascii: "["): return array()
            case UInt8(ascii: "\""): return string(asciiOnly: false)
            case UInt8(ascii: "t"):
                counts.nullsAndTrues += 1
                return literal("true")
            case UInt8(ascii: "f"): return literal("false")
            case UInt8(ascii: "n"):
                counts.nullsAndTrues += 1
                return literal("null")
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return number()
            default: return false
            }
        }

        private mutating func literal(_ text: StaticString) -> Bool {
            let length = text.utf8CodeUnitCount
            guard index + length <= count else { return false }
            for offset in 0..<length where bytes[index + offset] != text.utf8Start[offset] { return false }
            index += length
            return true
        }

        private mutating func object() -> Bool {
            depth += 1
            guard depth <= CanonicalObjectScan.maximumDepth else { return false }
            index += 1
            if peek() == UInt8(ascii: "}") {
                index += 1
                depth -= 1
                return true
            }
            counts.nonEmptyContainers += 1
            var previousKey: Range<Int>?
            while true {
                guard peek() == UInt8(ascii: "\"") else { return false }
                let keyStart = index + 1
                guard string(asciiOnly: true) else { return false }
                let key = keyStart..<(index - 1)
                if let previousKey, !isLess(previousKey, key) { return false }
                previousKey = key
                guard peek() == UInt8(ascii: ":") else { return false }
                index += 1
                guard value() else { return false }
                switch peek() {
                case UInt8(ascii: ","): index += 1
                case UInt8(ascii: "}"):
                    index += 1
                    depth -= 1
                    return true
                default: return false
                }
            }
        }

        private mutating func array() -> Bool {
            depth += 1
            guard depth <= CanonicalObjectScan.maximumDepth else { return false }
            index += 1
            if peek() == UInt8(ascii: "]") {
                index += 1
                depth -= 1
                return true
            }
            counts.nonEmptyContainers += 1
            while true {
                guard value() else { return false }
                switch peek() {
                case UInt8(ascii: ","): index += 1
                case UInt8(ascii: "]"):
                    index += 1
                    depth -= 1
                    return true
                default: return false
                }
            }
        }

        /// Byte order of two ASCII keys (the order of Swift `String` comparison for ASCII text).
        private func isLess(_ left: Range<Int>, _ right: Range<Int>) -> Bool {
            let common = min(left.count, right.count)
            for offset in 0..<common {
                let a = bytes[left.lowerBound + offset]
                let b = bytes[right.lowerBound + offset]
                if a != b { return a < b }
            }
            return left.count < right.count
        }

        /// A string without escapes or control characters; with `asciiOnly`, without bytes above 0x7F;
        /// otherwise those must form valid UTF-8 (which `JSONWriter` writes as they are).
        private mutating func string(asciiOnly: Bool) -> Bool {
            index += 1
            while index < count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    index += 1
                    return true
                }
                if byte == UInt8(ascii: "\\") || byte < 0x20 { return false }
                if byte < 0x80 {
                    index += 1
                    continue
                }
                guard !asciiOnly, let length = utf8SequenceLength() else { return false }
                index += length
            }
            return false
        }

        /// The length of the valid UTF-8 sequence starting at `index` (a byte above 0x7F), or nil.
        private func utf8SequenceLength() -> Int? {
            let first = bytes[index]
            let length: Int
            var low: UInt8 = 0x80
            var high: UInt8 = 0xBF
            switch first {
            case 0xC2...0xDF: length = 2
            case 0xE0: length = 3; low = 0xA0
            case 0xE1...0xEC, 0xEE...0xEF: length = 3
            case 0xED: length = 3; high = 0x9F
            case 0xF0: length = 4; low = 0x90
            case 0xF1...0xF3: length = 4
            case 0xF4: length = 4; high = 0x8F
            default: return nil
            }
            guard index + length <= count else { return nil }
            let second = bytes[index + 1]
            guard second >= low && second <= high else { return nil }
            for offset in 2..<length where bytes[index + offset] & 0xC0 != 0x80 { return nil }
            return length
        }

        /// An integer as `JSONWriter` writes an `Int64`: no leading zero, no `-0`, no fraction or exponent;
        /// at most 18 digits, so that it surely fits.
        private mutating func number() -> Bool {
            let negative = peek() == UInt8(ascii: "-")
            let numberStart = index
            if negative { index += 1 }
            let start = index
            while index < count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") { index += 1 }
            let digits = index - start
            guard digits >= 1, digits <= 18 else { return false }
            if bytes[start] == UInt8(ascii: "0") && (digits > 1 || negative) { return false }
            let next = peek()
            counts.integers += 1
            counts.integerBytes += index - numberStart
            return next != UInt8(ascii: ".") && next != UInt8(ascii: "e") && next != UInt8(ascii: "E")
        }
    }
}
