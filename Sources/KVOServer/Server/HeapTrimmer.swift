#if canImport(Glibc)
import Glibc
import KVOEngine
import KVOModel
#endif

/// Gives memory back to the operating system after a burst: once the connections' buffers (output
/// chunks and unfinished lines) have drained well below their peak, asks glibc's allocator to return
/// its free pages (`malloc_trim(0)`, which releases free pages anywhere in every arena, not only at the
/// top of the heap). Without it, 40 subscribers that stopped reading held 1.3 GB after they were gone:
/// the freed chunks sat between live allocations that the allocator cannot move.
///
/// Called from the server's housekeeping timer, never on the request path, and at most once per
/// `minimumInterval` (a trim walks the heap: milliseconds for a large one). Where the C library has no
/// `malloc_trim` (not glibc), it does nothing. Owned by `Server` (a value stored in it); loop thread only.
struct HeapTrimmer {
    /// How far (bytes) the buffers must have fallen from their peak before a trim is worth it.
    static let minimumDrop = 8 << 20
    /// Least time between two trims, in milliseconds.
    static let minimumInterval: UInt64 = 1000

    /// glibc's `malloc_trim`, looked up once (nil elsewhere).
    private static let mallocTrim: (@convention(c) (Int) -> Int32)? = {
        guard let symbol = dlsym(nil, "malloc_trim") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)
    }()

    private var lastTrim: UInt64 = 0
    /// The most bytes of unfinished lines held since the last trim (the output chunk pool keeps its own peak).
    private var peakInputBytes = 0
    /// Trims done (for tests and the log).
    private(set) var trimCount = 0

    /// The connections' unfinished lines hold `bytes` now (past `--max-total-input`, and every housekeeping tick).
    mutating func noteInput(_ bytes: Int) {
        peakInputBytes = max(peakInputBytes, bytes)
    }

    /// The housekeeping tick at `now` (milliseconds): trims when the output chunks in `pool` and the
    /// `bufferedInputBytes` of unfinished lines have drained far enough below their peak, and then starts new
    /// peaks. Returns whether it trimmed.
    mutating func trimAfterBurst(pool: OutputChunkPool, bufferedInputBytes: Int, now: UInt64) -> Bool {
        noteInput(bufferedInputBytes)
        let current = pool.bytesInUse + bufferedInputBytes
        guard trimIfWorthwhile(peak: pool.peakBytesInUse + peakInputBytes, current: current, now: now) else { return false }
        pool.resetPeak()
        peakInputBytes = bufferedInputBytes
        return true
    }

    /// Trims when the buffered bytes have fallen at least `minimumDrop` below `peak` and the last trim
    /// was `minimumInterval` ago or more (`now` in milliseconds). Returns true when it trimmed: the
    /// caller then starts a new peak.
    private mutating func trimIfWorthwhile(peak: Int, current: Int, now: UInt64) -> Bool {
        guard peak - current >= HeapTrimmer.minimumDrop, now &- lastTrim >= HeapTrimmer.minimumInterval,
              let trim = HeapTrimmer.mallocTrim
        else { return false }
        _ = trim(0)
        lastTrim = now
        trimCount += 1
        return true
    }
}
