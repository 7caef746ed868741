import CLibUV
#if canImport(Glibc)
import Glibc
import KVOEngine
import KVOModel
#endif

/// A connection's queued output: a list of fixed-size chunks from an `OutputChunkPool`, written
/// with one gathered write (`uv_try_write` / `uv_write` over several `uv_buf_t`s).
///
/// Growing never moves bytes already queued: a full chunk is sealed and the next bytes go into a
/// fresh chunk from the pool, so output of any size costs one copy (into the chunk) and no
/// `realloc`. The first chunk is a small one (`OutputChunkPool.firstChunkSize`, enough for a reply
/// or an event), the others full-size. Bytes the kernel took are consumed from the front, and every chunk emptied that way
/// goes straight back to the pool.
///
/// Fast path (per delivered event, `Server.deliverNotifications`): when the bytes fit in the chunk
/// being filled, `append` is one `memcpy` and `appendEventHead` three word stores and the digits,
/// with no reference counting (a plain struct over raw pointers; the pool is passed in, and touched
/// only when a chunk fills). A tail is split across chunks when it does not fit; an event head is
/// never split (it starts a new chunk when fewer than `eventHeadRoom` bytes are left, leaving the
/// few bytes at the end of the old chunk unused).
///
/// The first small chunk a buffer takes stays with it (`keptFirstChunk`) when its bytes are written
/// out, instead of going back to the pool: a connection's replies then need no allocation, and when
/// thousands of connections each queue a reply in one iteration (10,000 clients sending `observe`)
/// they do not allocate and free thousands of chunks among the engine's long-lived objects, which
/// left the heap fragmented and the memory counted against every observation (about 300 B each).
///
/// The one owner (`Connection`) must give the chunks back (`release(returningTo:)`) before
/// dropping the buffer, and must not copy it except to swap it. While a write is in flight libuv
/// reads the chunks, so the owner leaves that buffer alone until the write callback. Loop thread only.
struct ChunkedOutputBuffer {
    /// A full chunk, its size (to give it back) and how many of its bytes are output.
    private struct SealedChunk {
        let base: UnsafeMutablePointer<UInt8>
        let size: Int
        let count: Int
    }

    /// Contiguous bytes an event head may need: 24 head bytes and a signed 64-bit id (20 characters).
    static let eventHeadRoom = 48

    /// Chunks filled up, oldest first; they come before `fill`.
    private var sealed: [SealedChunk] = []
    /// The chunk being filled (nil when the buffer holds no chunk).
    private var fill: UnsafeMutablePointer<UInt8>?
    /// The small first chunk this buffer keeps between writes (nil until it first needs one).
    private var keptFirstChunk: UnsafeMutablePointer<UInt8>?
    /// Size of `fill`.
    private var fillSize = 0
    /// Bytes used in `fill`.
    private var fillCount = 0
    /// Bytes left in `fill` (0 when there is none).
    private var fillRoom = 0
    /// Bytes of the first chunk (the first sealed one, else `fill`) already written.
    private var frontOffset = 0
    /// Bytes queued and not yet consumed.
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    /// Chunks held (sealed ones and the one being filled).
    var chunkCount: Int { sealed.count + (fill == nil ? 0 : 1) }

    /// Chunks lent by the pool that this buffer holds: `chunkCount`, plus the kept first chunk while
    /// it holds no output (for tests and leak checks).
    var heldChunkCount: Int {
        guard let kept = keptFirstChunk, fill != kept, !sealed.contains(where: { $0.base == kept }) else { return chunkCount }
        return chunkCount + 1
    }

    // MARK: - Appending (the per-event fast path)

    /// Appends `bytes`, spilling into new chunks from `pool` when the current one is full.
    @inline(__always)
    mutating func append(_ bytes: UnsafeRawBufferPointer, pool: OutputChunkPool) {
        let length = bytes.count
        guard length > 0, let source = bytes.baseAddress else { return }
        if length <= fillRoom, let fill {
            memcpy(fill + fillCount, source, length)
            fillCount += length
            fillRoom -= length
            count += length
            return
        }
        appendSpanningChunks(source, length: length, pool: pool)
    }

    @inline(__always)
    mutating func append(_ bytes: [UInt8], pool: OutputChunkPool) {
        bytes.withUnsafeBytes { append($0, pool: pool) }
    }

    /// Appends the header of one unfragmented, unmasked WebSocket text frame (RFC 6455 section 5.2) of
    /// `payloadLength` bytes: 2 bytes up to 125, 4 up to 65,535, else 10.
    @inline(__always)
    mutating func appendWebSocketTextFrameHeader(payloadLength: Int, pool: OutputChunkPool) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 10) { header in
            header[0] = 0x81  // FIN, text
            var length = 2
            if payloadLength <= 125 {
                header[1] = UInt8(payloadLength)
            } else if payloadLength <= 0xFFFF {
                header[1] = 126
                header[2] = UInt8(truncatingIfNeeded: payloadLength >> 8)
                header[3] = UInt8(truncatingIfNeeded: payloadLength)
                length = 4
            } else {
                header[1] = 127
                for index in 0..<8 { header[2 + index] = UInt8(truncatingIfNeeded: UInt64(payloadLength) >> (56 - 8 * UInt64(index))) }
                length = 10
            }
            append(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(header)[0..<length]), pool: pool)
        }
    }

    /// Decimal digits of `value` as `appendEventHead` writes it (with the sign).
    @inline(__always)
    static func decimalLength(_ value: Int64) -> Int {
        var digits = value < 0 ? 2 : 1
        var probe = value.magnitude / 10
        while probe > 0 {
            digits += 1
            probe /= 10
        }
        return digits
    }

    /// Appends an event's head (`{"event":"change","sub":`, or the compact `{"s":`: `EventEncoder`) and
    /// the subscription id, without a `memcpy` call: 24 head bytes as three 8-byte stores, of which
    /// the first `headLength` (at most 24) are kept, the digits written in place after them.
    @inline(__always)
    mutating func appendEventHead(_ head: (UInt64, UInt64, UInt64), headLength: Int, subscription: Int64,
                                  pool: OutputChunkPool) {
        if fillRoom < ChunkedOutputBuffer.eventHeadRoom { startChunk(pool: pool) }
        guard let fill else { return }
        let start = UnsafeMutableRawPointer(fill + fillCount)
        start.storeBytes(of: head.0, toByteOffset: 0, as: UInt64.self)
        start.storeBytes(of: head.1, toByteOffset: 8, as: UInt64.self)
        start.storeBytes(of: head.2, toByteOffset: 16, as: UInt64.self)
        var written = headLength
        var magnitude = subscription.magnitude
        var digits = 1
        var probe = magnitude / 10
        while probe > 0 {
            digits += 1
            probe /= 10
        }
        if subscription < 0 {
            fill[fillCount + written] = UInt8(ascii: "-")
            written += 1
        }
        var position = fillCount + written + digits
        repeat {
            position -= 1
            fill[position] = UInt8(ascii: "0") + UInt8(magnitude % 10)
            magnitude /= 10
        } while magnitude > 0
        written += digits
        fillCount += written
        fillRoom -= written
        count += written
    }

    /// The slow path of `append`: fills the current chunk, then as many new ones as needed.
    private mutating func appendSpanningChunks(_ source: UnsafeRawPointer, length: Int, pool: OutputChunkPool) {
        var copied = 0
        while copied < length {
            if fillRoom == 0 { startChunk(pool: pool) }
            guard let fill else { return }
            let piece = min(fillRoom, length - copied)
            memcpy(fill + fillCount, source + copied, piece)
            fillCount += piece
            fillRoom -= piece
            copied += piece
        }
        count += length
    }

    /// Seals the chunk being filled (if any) and takes a fresh one from the pool.
    private mutating func startChunk(pool: OutputChunkPool) {
        // A buffer holds no chunk exactly when `fill` is nil (sealed chunks always precede it).
        if let fill {
            if fillCount > 0 {
                sealed.append(SealedChunk(base: fill, size: fillSize, count: fillCount))
            } else {
                giveBack(fill, size: fillSize, to: pool)
            }
            self.fill = pool.take(size: pool.chunkSize)
            fillSize = pool.chunkSize
        } else {
            let first = keptFirstChunk ?? pool.take(size: pool.firstChunkSize)
            keptFirstChunk = first
            self.fill = first
            fillSize = pool.firstChunkSize
        }
        fillCount = 0
        fillRoom = fillSize
    }

    // MARK: - Writing

    /// Describes the queued bytes, front first, as up to `capacity` `uv_buf_t`s pointing into the
    /// chunks; returns how many it filled. The chunks must stay untouched while libuv uses them.
    func gather(into buffers: UnsafeMutablePointer<uv_buf_t>, capacity: Int) -> Int {
        var filled = 0
        var offset = frontOffset
        for chunk in sealed {
            guard filled < capacity else { return filled }
            buffers[filled] = uv_buf_t(base: UnsafeMutableRawPointer(chunk.base + offset).assumingMemoryBound(to: CChar.self),
                                       len: chunk.count - offset)
            filled += 1
            offset = 0
        }
        if let fill, fillCount > offset, filled < capacity {
            buffers[filled] = uv_buf_t(base: UnsafeMutableRawPointer(fill + offset).assumingMemoryBound(to: CChar.self),
                                       len: fillCount - offset)
            filled += 1
        }
        return filled
    }

    /// Drops the first `written` bytes (what the kernel took), giving each chunk emptied that way
    /// back to `pool`. When nothing is left the chunk being filled goes back too.
    mutating func consume(_ written: Int, returningTo pool: OutputChunkPool) {
        guard written < count else {
            removeAll(returningTo: pool)
            return
        }
        count -= written
        var remaining = written
        var emptied = 0
        while remaining > 0, emptied < sealed.count {
            let left = sealed[emptied].count - frontOffset
            if remaining < left {
                frontOffset += remaining
                remaining = 0
            } else {
                giveBack(sealed[emptied].base, size: sealed[emptied].size, to: pool)
                remaining -= left
                frontOffset = 0
                emptied += 1
            }
        }
        sealed.removeFirst(emptied)
        // Whatever is left falls in the chunk being filled, which still holds unwritten bytes.
        frontOffset += remaining
    }

    /// Forgets the contents and gives every chunk back to `pool` but the kept first one (the buffer
    /// is usable again).
    mutating func removeAll(returningTo pool: OutputChunkPool) {
        for chunk in sealed { giveBack(chunk.base, size: chunk.size, to: pool) }
        sealed.removeAll(keepingCapacity: sealed.capacity <= 64)
        if let fill { giveBack(fill, size: fillSize, to: pool) }
        fill = nil
        fillSize = 0
        fillCount = 0
        fillRoom = 0
        frontOffset = 0
        count = 0
    }

    /// Forgets the contents and gives every chunk back to `pool`, the kept first one too: before the
    /// buffer is dropped.
    mutating func release(returningTo pool: OutputChunkPool) {
        removeAll(returningTo: pool)
        if let kept = keptFirstChunk { pool.recycle(kept, size: pool.firstChunkSize) }
        keptFirstChunk = nil
    }

    /// Gives `chunk` back to `pool`, unless it is the first chunk this buffer keeps.
    @inline(__always)
    private func giveBack(_ chunk: UnsafeMutablePointer<UInt8>, size: Int, to pool: OutputChunkPool) {
        if chunk != keptFirstChunk { pool.recycle(chunk, size: size) }
    }
}
