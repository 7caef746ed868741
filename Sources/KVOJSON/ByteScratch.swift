#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A line written piece by piece into temporary memory, then appended to an array in one copy.
///
/// `Array.append(contentsOf:)` costs about 90 instructions however few bytes it copies, so an encoder that
/// writes a reply or an event as ten short pieces paid that ten times (issue 28: about 1,500 instructions of
/// a `set` with one subscriber). Writing into a `ByteScratch` is a bounds check and a copy. The caller states
/// the most it will write (`append(atMost:to:_:)`); writing more is a precondition failure, never an overrun.
/// Lives only inside `append(atMost:to:_:)`, on the caller's thread.
public struct ByteScratch: ~Copyable {
    @usableFromInline let base: UnsafeMutablePointer<UInt8>
    @usableFromInline let capacity: Int
    /// Bytes written so far.
    @usableFromInline var written = 0

    /// Bytes written so far.
    public var count: Int { written }

    @usableFromInline init(base: UnsafeMutablePointer<UInt8>, capacity: Int) {
        self.base = base
        self.capacity = capacity
    }

    /// Runs `body` with a scratch of `capacity` bytes (on the stack when small) and appends what it wrote to
    /// `buffer`.
    @inlinable
    public static func append(atMost capacity: Int, to buffer: inout [UInt8], _ body: (inout ByteScratch) -> Void) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: capacity) { memory in
            var scratch = ByteScratch(base: memory.baseAddress!, capacity: capacity)
            body(&scratch)
            buffer.append(contentsOf: UnsafeBufferPointer(start: memory.baseAddress!, count: scratch.count))
        }
    }

    /// Appends one byte.
    @inlinable @inline(__always)
    public mutating func append(_ byte: UInt8) {
        precondition(count < capacity, "ByteScratch: more written than its stated bound")
        base[written] = byte
        written += 1
    }

    /// Appends `text`'s bytes.
    @inlinable @inline(__always)
    public mutating func append(_ text: StaticString) {
        append(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// Appends `bytes`.
    @inlinable
    public mutating func append(_ bytes: UnsafeBufferPointer<UInt8>) {
        precondition(bytes.count <= capacity - count, "ByteScratch: more written than its stated bound")
        guard let source = bytes.baseAddress, !bytes.isEmpty else { return }
        (base + written).update(from: source, count: bytes.count)
        written += bytes.count
    }

    /// Appends `bytes`.
    @inlinable
    public mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBufferPointer { append($0) }
    }

    /// Appends `text`'s UTF-8 bytes as they are (no quotes, no escaping).
    @inlinable
    public mutating func appendRaw(_ text: String) {
        var text = text
        text.withUTF8 { append($0) }
    }

    /// Appends a decimal integer (at most 21 bytes: a sign and 20 digits).
    public mutating func appendInteger(_ value: Int64) {
        appendDigits(of: value.magnitude, negative: value < 0)
    }

    /// Appends a decimal integer (at most 21 bytes: a sign and 20 digits).
    public mutating func appendInteger(_ value: UInt64) {
        appendDigits(of: value, negative: false)
    }

    private mutating func appendDigits(of magnitude: UInt64, negative: Bool) {
        precondition(capacity - written >= 21, "ByteScratch: more written than its stated bound")
        var rest = magnitude
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: a sign and 20 digits fit
        let length: Int = withUnsafeMutableBytes(of: &digits) { raw in
            var start = raw.count
            repeat {
                start -= 1
                raw[start] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest % 10)
                rest /= 10
            } while rest > 0
            if negative {
                start -= 1
                raw[start] = UInt8(ascii: "-")
            }
            (base + written).update(from: raw.baseAddress!.assumingMemoryBound(to: UInt8.self) + start, count: raw.count - start)
            return raw.count - start
        }
        written += length
    }

    /// Appends a decimal integer.
    @inlinable
    public mutating func appendInteger(_ value: Int) {
        appendInteger(Int64(value))
    }

    /// The most `appendString` writes for a string of `utf8Count` bytes: every byte escaped as `\u00XX`, and
    /// the quotes.
    @inlinable
    public static func quotedBound(utf8Count: Int) -> Int {
        6 * utf8Count + 2
    }

    /// Appends `text` as a quoted JSON string, exactly as `JSONWriter.writeString` writes it (at most
    /// `quotedBound(utf8Count:)` bytes).
    public mutating func appendString(_ text: String) {
        var text = text
        let plain: Bool = text.withUTF8 { utf8 in
            var position = 0
            while position + 8 <= utf8.count {
                if ByteScan.needsEscaping(ByteScan.word(at: utf8.baseAddress! + position)) { return false }
                position += 8
            }
            while position < utf8.count {
                let byte = utf8[position]
                if byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { return false }
                position += 1
            }
            append(UInt8(ascii: "\""))
            append(utf8)
            append(UInt8(ascii: "\""))
            return true
        }
        if !plain {
            // Something to escape (rare in ids and key paths): the writer's own escaping, then one copy.
            var escaped: [UInt8] = []
            JSONWriter.writeString(text, into: &escaped)
            append(escaped)
        }
    }
}
