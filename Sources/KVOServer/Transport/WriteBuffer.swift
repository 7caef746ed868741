#if canImport(Glibc)
import Glibc
#endif

/// A growable, contiguous byte buffer in malloc'd memory: the server's arena for one notification's
/// encoded event tails (`Server.deliverNotifications`), which recipients' output buffers copy from.
///
/// A plain struct over a raw pointer, so appending costs no reference counting. Growing moves the
/// contents (`realloc`), so it suits scratch space reused at a steady size, not per-connection output
/// (that is `ChunkedOutputBuffer`). The one owner must call `release()` exactly once and must not
/// copy the buffer. Loop thread only.
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
