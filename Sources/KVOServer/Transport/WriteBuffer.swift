#if canImport(Glibc)
import Glibc
#endif

/// A growable byte buffer in malloc'd memory, handed to `uv_write` without copying.
///
/// Owned by one `Connection`; while a write is in flight libuv reads its memory, so the connection
/// must not touch it until the write callback. Loop thread only.
final class WriteBuffer {
    private(set) var base: UnsafeMutablePointer<UInt8>?
    private(set) var count = 0
    private(set) var capacity = 0

    deinit { free(base) }

    var isEmpty: Bool { count == 0 }

    func append(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        reserve(count + bytes.count)
        memcpy(base! + count, bytes.baseAddress!, bytes.count)
        count += bytes.count
    }

    func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// Appends a decimal integer.
    func appendInteger(_ value: Int64) {
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
    func reset(retainedCapacity: Int) {
        count = 0
        if capacity > retainedCapacity {
            free(base)
            base = nil
            capacity = 0
        }
    }

    private func reserve(_ needed: Int) {
        guard needed > capacity else { return }
        var newCapacity = max(capacity * 2, 4096)
        while newCapacity < needed { newCapacity *= 2 }
        guard let grown = realloc(base, newCapacity) else { fatalError("out of memory growing a write buffer") }
        base = grown.assumingMemoryBound(to: UInt8.self)
        capacity = newCapacity
    }
}
