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

    /// Appends an event's head, `{"event":"change","sub":` and the subscription id, without a
    /// `memcpy` call: the 24 head bytes as three 8-byte stores, the digits written in place. (Two
    /// of the three copies per delivered event; see `Server.deliverNotifications`.)
    @inline(__always)
    mutating func appendEventHead(_ head: (UInt64, UInt64, UInt64), subscription: Int64) {
        if count + 48 > capacity { reserve(count + 48) }
        let start = UnsafeMutableRawPointer(base! + count)
        start.storeBytes(of: head.0, toByteOffset: 0, as: UInt64.self)
        start.storeBytes(of: head.1, toByteOffset: 8, as: UInt64.self)
        start.storeBytes(of: head.2, toByteOffset: 16, as: UInt64.self)
        count += 24
        var magnitude = subscription.magnitude
        var digits = 1
        var probe = magnitude / 10
        while probe > 0 {
            digits += 1
            probe /= 10
        }
        if subscription < 0 {
            base![count] = UInt8(ascii: "-")
            count += 1
        }
        var position = count + digits
        repeat {
            position -= 1
            base![position] = UInt8(ascii: "0") + UInt8(magnitude % 10)
            magnitude /= 10
        } while magnitude > 0
        count += digits
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
