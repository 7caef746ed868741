#if canImport(Glibc)
import Glibc
#endif

/// A growable byte buffer in malloc'd memory, handed to `uv_write` without copying.
///
/// A plain struct over a raw pointer, so appending costs no reference counting (this is the
/// per-event hot path). The one owner (`Connection`) must call `release()` exactly once and must
/// not copy the buffer except to swap it; while a write is in flight libuv reads its memory, so the
/// owner leaves it alone until the write callback. Loop thread only.
struct WriteBuffer {
    private(set) var base: UnsafeMutablePointer<UInt8>?
    private(set) var count = 0
    private(set) var capacity = 0

    var isEmpty: Bool { count == 0 }

    @inline(__always)
    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        if count + bytes.count > capacity { reserve(count + bytes.count) }
        memcpy(base! + count, bytes.baseAddress!, bytes.count)
        count += bytes.count
    }

    @inline(__always)
    mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// Appends a decimal integer.
    mutating func appendInteger(_ value: Int64) {
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
        var magnitude = value.magnitude
        var position = 24
        withUnsafeMutableBytes(of: &digits) { raw in
            repeat {
                position -= 1
                raw[position] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            if value < 0 {
                position -= 1
                raw[position] = UInt8(ascii: "-")
            }
            append(UnsafeRawBufferPointer(rebasing: raw[position...]))
        }
    }

    /// Forgets the contents; gives memory back when the buffer grew past `retainedCapacity`.
    mutating func reset(retainedCapacity: Int) {
        count = 0
        if capacity > retainedCapacity { release() }
    }

    /// Frees the memory (the buffer is empty and usable again afterwards).
    mutating func release() {
        free(base)
        base = nil
        capacity = 0
        count = 0
    }

    private mutating func reserve(_ needed: Int) {
        var newCapacity = max(capacity * 2, 4096)
        while newCapacity < needed { newCapacity *= 2 }
        guard let grown = realloc(base, newCapacity) else { fatalError("out of memory growing a write buffer") }
        base = grown.assumingMemoryBound(to: UInt8.self)
        capacity = newCapacity
    }
}
