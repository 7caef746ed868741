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
        // For each open container, where the key before it in the object that holds it starts, restored when
        // it closes. On the stack (a constant capacity of at most 1,024 bytes, or it would be allocated).
        assert(maximumDepth <= 64)
        return withUnsafeTemporaryAllocation(of: Int.self, capacity: 64) { savedKeys in
            scan(base, count: bytes.count, savedKeys: savedKeys.baseAddress!)
        }
    }

    /// Whether `bytes` is `JSONWriter`'s encoding of an object (see the type's note).
    public static func isCanonicalObject(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBufferPointer { isCanonicalObject($0) }
    }

    /// One loop over the text, without recursion: `depth` open containers, bit `d - 1` of `objects` set when
    /// the container at depth `d` is an object; `keyStart..<keyEnd` the current object's last key (`keyStart`
    /// 0: none yet; position 0 is the outer `{`, never a key). Returns nil as soon as the text leaves the
    /// canonical form.
    private static func scan(_ p: UnsafePointer<UInt8>, count: Int, savedKeys: UnsafeMutablePointer<Int>) -> Counts? {
        var counts = Counts()
        var i = 0
        var depth = 0
        var objects: UInt64 = 0
        var keyStart = 0
        var keyEnd = 0
        var inObject = false  // whether the innermost open container is an object
        while true {
            // A value at `i`.
            guard i < count else { return nil }
            switch p[i] {
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                let isObject = p[i] == UInt8(ascii: "{")
                guard depth < maximumDepth else { return nil }
                savedKeys[depth] = keyStart
                let bit: UInt64 = 1 << UInt64(depth)
                depth += 1
                inObject = isObject
                i &+= 1
                guard i < count else { return nil }
                if isObject {
                    objects |= bit
                    keyStart = 0
                    if p[i] == UInt8(ascii: "}") {
                        i &+= 1
                        closeContainer(depth: &depth, keyStart: &keyStart, inObject: &inObject, savedKeys, objects)
                        break
                    }
                    counts.nonEmptyContainers += 1
                    guard key(p, count: count, at: &i, keyStart: &keyStart, keyEnd: &keyEnd) else { return nil }
                    continue
                }
                objects &= ~bit
                if p[i] == UInt8(ascii: "]") {
                    i &+= 1
                    closeContainer(depth: &depth, keyStart: &keyStart, inObject: &inObject, savedKeys, objects)
                    break
                }
                counts.nonEmptyContainers += 1
                continue
            case UInt8(ascii: "\""):
                i &+= 1
                guard string(p, count: count, at: &i, asciiOnly: false) else { return nil }
            case UInt8(ascii: "t"):
                guard literal(p, count: count, at: &i, "true") else { return nil }
                counts.nullsAndTrues += 1
            case UInt8(ascii: "n"):
                guard literal(p, count: count, at: &i, "null") else { return nil }
                counts.nullsAndTrues += 1
            case UInt8(ascii: "f"):
                guard literal(p, count: count, at: &i, "false") else { return nil }
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                // An integer as `JSONWriter` writes an `Int64`: no leading zero, no `-0`, no fraction or
                // exponent; at most 18 digits, so that it surely fits.
                let numberStart = i
                let negative = p[i] == UInt8(ascii: "-")
                if negative { i &+= 1 }
                let digitsStart = i
                while i < count, p[i] &- UInt8(ascii: "0") < 10 { i &+= 1 }
                let digits = i - digitsStart
                guard digits >= 1, digits <= 18 else { return nil }
                if p[digitsStart] == UInt8(ascii: "0") && (digits > 1 || negative) { return nil }
                if i < count {
                    let next = p[i]
                    if next == UInt8(ascii: ".") || next == UInt8(ascii: "e") || next == UInt8(ascii: "E") { return nil }
                }
                counts.integers += 1
                counts.integerBytes += i - numberStart
            default:
                return nil
            }
            // After a value: a comma and the next member or element, or the container's end (and then after
            // that container's value, again).
            while true {
                guard depth > 0 else { return i == count ? counts : nil }
                guard i < count else { return nil }
                let byte = p[i]
                i &+= 1
                if byte == UInt8(ascii: ",") {
                    if inObject {
                        guard key(p, count: count, at: &i, keyStart: &keyStart, keyEnd: &keyEnd) else { return nil }
                    }
                    break
                }
                guard byte == (inObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) else { return nil }
                closeContainer(depth: &depth, keyStart: &keyStart, inObject: &inObject, savedKeys, objects)
                if keyStart != 0 {
                    // The key ends at its closing quote (a key has no escapes).
                    keyEnd = keyStart
                    while p[keyEnd] != UInt8(ascii: "\"") { keyEnd &+= 1 }
                }
            }
        }
    }

    /// Closes the innermost container: one level up, that level's last key back (`keyStart`; 0 for none) and
    /// whether the container now innermost is an object (bit `depth - 1` of `objects`).
    @inline(__always)
    private static func closeContainer(depth: inout Int, keyStart: inout Int, inObject: inout Bool,
                                       _ savedKeys: UnsafeMutablePointer<Int>, _ objects: UInt64) {
        depth -= 1
        keyStart = savedKeys[depth]
        inObject = depth > 0 && objects & (1 << UInt64(depth - 1)) != 0
    }

    /// An object's key at `i` and its colon: an ASCII string without escapes, after the object's previous key
    /// (`keyStart..<keyEnd`, none when `keyStart` is 0) in byte order (the order of Swift `String`
    /// comparison for ASCII text), which it then replaces; `i` past the colon.
    @inline(__always)
    private static func key(_ p: UnsafePointer<UInt8>, count: Int, at i: inout Int,
                            keyStart: inout Int, keyEnd: inout Int) -> Bool {
        guard i < count, p[i] == UInt8(ascii: "\"") else { return false }
        i &+= 1
        let start = i
        guard string(p, count: count, at: &i, asciiOnly: true) else { return false }
        let end = i - 1
        if keyStart != 0 {
            let previousCount = keyEnd - keyStart
            let currentCount = end - start
            let common = min(previousCount, currentCount)
            var offset = 0
            while offset < common, p[keyStart + offset] == p[start + offset] { offset += 1 }
            if offset < common {
                guard p[keyStart + offset] < p[start + offset] else { return false }
            } else {
                guard previousCount < currentCount else { return false }
            }
        }
        keyStart = start
        keyEnd = end
        guard i < count, p[i] == UInt8(ascii: ":") else { return false }
        i &+= 1
        return true
    }

    /// The rest of a string from `i` (past its opening quote) to past its closing quote: without escapes
    /// or control characters; with `asciiOnly`, without bytes above 0x7F; otherwise those must form valid
    /// UTF-8 (which `JSONWriter` writes as they are). Eight bytes at a time while eight remain.
    @inline(__always)
    private static func string(_ p: UnsafePointer<UInt8>, count: Int, at i: inout Int, asciiOnly: Bool) -> Bool {
        while true {
            if i &+ 8 <= count {
                let skip = ByteScan.firstSpecialByte(ByteScan.littleEndianWord(at: p + i))
                i &+= skip
                if skip == 8 { continue }
            } else {
                guard i < count else { return false }
                let byte = p[i]
                if byte >= 0x20 && byte < 0x80 && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\") {
                    i &+= 1
                    continue
                }
            }
            // A quote, a backslash, a control character or a byte above 0x7F.
            let byte = p[i]
            if byte == UInt8(ascii: "\"") {
                i &+= 1
                return true
            }
            guard byte >= 0x80, !asciiOnly, let length = ByteScan.utf8SequenceLength(p, count: count, at: i) else { return false }
            i &+= length
        }
    }

    /// `text` at `i` (its first byte already seen there), and `i` past it.
    @inline(__always)
    private static func literal(_ p: UnsafePointer<UInt8>, count: Int, at i: inout Int, _ text: StaticString) -> Bool {
        let length = text.utf8CodeUnitCount
        guard i + length <= count else { return false }
        for offset in 1..<length where p[i + offset] != text.utf8Start[offset] { return false }
        i += length
        return true
    }
}
