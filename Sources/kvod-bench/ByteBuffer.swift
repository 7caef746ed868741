#if canImport(Glibc)
import Glibc
#endif

/// A growable FIFO of bytes on malloc'd memory: requests are appended at the end and sent from the front,
/// so a connection's output for one loop iteration goes out in one `send`. Used by one thread only.
final class ByteBuffer {
    private(set) var base: UnsafeMutablePointer<UInt8>?
    private(set) var capacity = 0
    /// The first unread byte.
    private(set) var readIndex = 0
    /// One past the last written byte.
    private(set) var writeIndex = 0

    init() {}

    deinit { free(base) }

    /// Bytes appended and not yet consumed.
    var count: Int { writeIndex - readIndex }

    var isEmpty: Bool { writeIndex == readIndex }

    /// The unread bytes (valid until the next mutation).
    var readable: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: base.map { $0 + readIndex }, count: count)
    }

    /// Drops `count` bytes from the front; once nothing is left the buffer starts over at offset 0.
    func consume(_ count: Int) {
        readIndex += count
        if readIndex == writeIndex { readIndex = 0; writeIndex = 0 }
    }

    /// Empties the buffer (keeps its memory).
    func removeAll() { readIndex = 0; writeIndex = 0 }

    /// Makes room for `count` more bytes and returns where they go; `commit(count)` then makes them part of
    /// the buffer. Moves the unread bytes to the front, or grows the allocation, when needed.
    func reserve(_ count: Int) -> UnsafeMutablePointer<UInt8> {
        if writeIndex + count > capacity {
            let unread = self.count
            if readIndex > 0 && unread + count <= capacity {
                if unread > 0 { memmove(base!, base! + readIndex, unread) }
            } else {
                var newCapacity = max(capacity * 2, 256)
                while newCapacity < unread + count { newCapacity *= 2 }
                let grown = malloc(newCapacity)!.assumingMemoryBound(to: UInt8.self)
                if unread > 0 { memcpy(grown, base! + readIndex, unread) }
                free(base)
                base = grown
                capacity = newCapacity
            }
            readIndex = 0
            writeIndex = unread
        }
        return base! + writeIndex
    }

    /// Adds `count` bytes written into the space `reserve` returned.
    func commit(_ count: Int) { writeIndex += count }

    func append(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        let destination = reserve(bytes.count)
        memcpy(destination, bytes.baseAddress!, bytes.count)
        commit(bytes.count)
    }

    func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    func append(_ text: String) {
        var text = text
        text.withUTF8 { append(UnsafeRawBufferPointer($0)) }
    }

    /// Appends `value` in decimal ASCII.
    func appendDecimal(_ value: Int) {
        precondition(value >= 0)
        var digits = 1
        var rest = value / 10
        while rest > 0 { digits += 1; rest /= 10 }
        let destination = reserve(digits)
        var remaining = value
        for position in stride(from: digits - 1, through: 0, by: -1) {
            destination[position] = UInt8(ascii: "0") + UInt8(remaining % 10)
            remaining /= 10
        }
        commit(digits)
    }
}
