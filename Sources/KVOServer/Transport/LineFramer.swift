#if canImport(Glibc)
import Glibc
import KVOEngine
import KVOModel
#endif

/// Splits a byte stream into lines ending in `\n` (a `\r` before it is dropped), with a hard limit
/// on line length.
///
/// Lines that arrive whole within one chunk are handed out in place, without copying; only a line
/// split across reads is gathered in `partial`. A line longer than the limit is reported once, as
/// soon as it passes the limit, and the rest of it is skipped as it arrives: it is never buffered
/// whole. Owned by one connection; loop thread only.
struct LineFramer {
    /// What the framer found.
    enum Frame {
        /// A complete line, valid only during the callback.
        case line(UnsafeBufferPointer<UInt8>)
        /// A line passed the limit; its remaining bytes will be discarded.
        case tooLarge
    }

    let maximumLineLength: Int
    private var partial: [UInt8] = []
    private var discarding = false

    init(maximumLineLength: Int) {
        self.maximumLineLength = maximumLineLength
    }

    /// Bytes held for an unfinished line: what the connection counts against `--max-total-input`.
    var bufferedCount: Int { partial.count }

    /// Capacity kept for the next split line once one is handed out; larger buffers are freed. 4 KiB
    /// covers the usual request, so a stream of them split across reads does not reallocate, and
    /// 10,000 idle connections keep at most 40 MB.
    static let retainedCapacity = 4096

    /// Feeds one chunk; calls `body` for each frame in order. `body` returns false to stop early (the
    /// connection closed, or paused its reading); the rest of the chunk is then not looked at. Returns
    /// how many bytes of the chunk were consumed: all of them, or up to the end of the line (its
    /// newline included) whose frame stopped it, so that a paused connection can feed the rest later.
    @discardableResult
    mutating func feed(_ chunk: UnsafeBufferPointer<UInt8>, _ body: (Frame) -> Bool) -> Int {
        guard let base = chunk.baseAddress else { return 0 }
        var position = 0
        while position < chunk.count {
            let remaining = chunk.count - position
            guard let found = memchr(base + position, 0x0A, remaining) else {
                // No newline in the rest of the chunk: keep it for later, or skip it.
                if discarding { return chunk.count }
                // A trailing \r may be the first half of a \r\n split across reads: it does not count.
                let allowed = maximumLineLength + (base[chunk.count - 1] == 0x0D ? 1 : 0)
                if partial.count + remaining > allowed {
                    releasePartial()
                    discarding = true
                    _ = body(.tooLarge)
                    return chunk.count
                }
                partial.append(contentsOf: UnsafeBufferPointer(start: base + position, count: remaining))
                return chunk.count
            }
            let newline = UnsafeRawPointer(found) - UnsafeRawPointer(base)
            defer { position = newline + 1 }
            if discarding {
                discarding = false
                continue
            }
            let segment = UnsafeBufferPointer(start: base + position, count: newline - position)
            if partial.isEmpty {
                if segment.count > maximumLineLength + (segment.last == 0x0D ? 1 : 0) {
                    if !body(.tooLarge) { return newline + 1 }
                    continue
                }
                if !body(.line(trimmingCarriageReturn(segment))) { return newline + 1 }
            } else {
                let endsInCarriageReturn = (segment.last ?? partial.last) == 0x0D
                if partial.count + segment.count > maximumLineLength + (endsInCarriageReturn ? 1 : 0) {
                    releasePartial()
                    if !body(.tooLarge) { return newline + 1 }
                    continue
                }
                partial.append(contentsOf: segment)
                let keepGoing = partial.withUnsafeBufferPointer { body(.line(trimmingCarriageReturn($0))) }
                releasePartial()
                if !keepGoing { return newline + 1 }
            }
        }
        return chunk.count
    }

    private func trimmingCarriageReturn(_ line: UnsafeBufferPointer<UInt8>) -> UnsafeBufferPointer<UInt8> {
        guard line.last == 0x0D else { return line }
        return UnsafeBufferPointer(rebasing: line.dropLast())
    }

    private mutating func releasePartial() {
        partial.removeAll(keepingCapacity: partial.capacity <= LineFramer.retainedCapacity)
    }
}
