import CLibUV
#if canImport(Glibc)
import Glibc
import KVOEngine
import KVOModel
#endif

/// The fixed-size memory chunks every connection's output is written into, kept for reuse.
///
/// Output buffers (`ChunkedOutputBuffer`) grow by taking chunks from here and give them back once
/// the kernel has taken their bytes, so a burst never re-grows (`realloc`, `memmove`, page faults)
/// one big buffer per connection: a connection with nothing queued holds no chunk at all, and a
/// chunk written out is reused at once by whichever connection needs one next. Free chunks are
/// reused last-in first-out, so the one taken is the one most likely still in the cache. At most
/// `retainedChunkLimit` free chunks of each size are kept; any beyond are freed.
///
/// Two sizes: a buffer's first chunk is a small one (`firstChunkSize`), later ones are
/// `chunkSize`. Most connections queue a reply or a few events per iteration, and when thousands
/// of them do so in the same iteration (10,000 clients each sending `observe`), a full-size chunk
/// each would briefly need tens of MB.
///
/// Also lends the `uv_buf_t` array a flush gathers a buffer's chunks into (libuv copies that array
/// in `uv_write`, so one array serves every connection).
///
/// Owned by the `EventLoop`; each `Connection` holds a reference, so the pool outlives every chunk
/// it lent. Loop thread only.
final class OutputChunkPool {
    /// Bytes in a buffer's first chunk.
    let firstChunkSize: Int
    /// Bytes in every further chunk.
    let chunkSize: Int
    /// Free chunks of each size kept for reuse; a chunk given back beyond this is freed.
    let retainedChunkLimit: Int
    /// Free chunks of `firstChunkSize` and of `chunkSize`, the most recently returned last.
    private var freeFirstChunks: [UnsafeMutablePointer<UInt8>] = []
    private var freeChunks: [UnsafeMutablePointer<UInt8>] = []
    /// Chunks lent out and not yet given back (for tests and leak checks).
    private(set) var chunksInUse = 0
    /// Bytes of the chunks lent out: every connection's queued output together, counted where it
    /// already changes size (a chunk taken or given back, once per chunk, never per event). The server
    /// holds it to `--max-total-output` (`Server.enforceTotalOutputLimit()`).
    @exclusivity(unchecked) private(set) var bytesInUse = 0
    /// The most `bytesInUse` has been since `resetPeak()`: the server returns memory to the system
    /// after a burst has drained (`Server.returnMemoryAfterBurst()`).
    @exclusivity(unchecked) private(set) var peakBytesInUse = 0
    /// Scratch `uv_buf_t`s for `gatherBuffers(capacity:)`.
    private var gatherStorage: UnsafeMutablePointer<uv_buf_t>
    private var gatherCapacity: Int

    /// The smallest chunk: room for the largest event head (`ChunkedOutputBuffer.eventHeadRoom`).
    static let minimumChunkSize = 64

    init(firstChunkSize: Int, chunkSize: Int, retainedChunkLimit: Int) {
        precondition(min(firstChunkSize, chunkSize) >= OutputChunkPool.minimumChunkSize,
                     "output chunks must hold an event head")
        self.firstChunkSize = firstChunkSize
        self.chunkSize = chunkSize
        self.retainedChunkLimit = retainedChunkLimit
        gatherCapacity = 64
        gatherStorage = .allocate(capacity: gatherCapacity)
    }

    deinit {
        for chunk in freeFirstChunks { free(chunk) }
        for chunk in freeChunks { free(chunk) }
        gatherStorage.deallocate()
    }

    /// Free chunks held for reuse (both sizes).
    var freeChunkCount: Int { freeFirstChunks.count + freeChunks.count }

    /// A chunk of `size` bytes, `firstChunkSize` or `chunkSize` (contents undefined), reused when
    /// one is free.
    func take(size: Int) -> UnsafeMutablePointer<UInt8> {
        chunksInUse += 1
        bytesInUse += size
        if bytesInUse > peakBytesInUse { peakBytesInUse = bytesInUse }
        if size == chunkSize, let chunk = freeChunks.popLast() { return chunk }
        if size != chunkSize, let chunk = freeFirstChunks.popLast() { return chunk }
        guard let fresh = malloc(size) else { fatalError("out of memory allocating an output chunk") }
        return fresh.assumingMemoryBound(to: UInt8.self)
    }

    /// Takes back a chunk of `size` bytes from `take(size:)`; its owner must not touch it afterwards.
    func recycle(_ chunk: UnsafeMutablePointer<UInt8>, size: Int) {
        chunksInUse -= 1
        bytesInUse -= size
        if size == chunkSize, freeChunks.count < retainedChunkLimit {
            freeChunks.append(chunk)
        } else if size != chunkSize, freeFirstChunks.count < retainedChunkLimit {
            freeFirstChunks.append(chunk)
        } else {
            free(chunk)
        }
    }

    /// Starts a new peak: `peakBytesInUse` becomes `bytesInUse`.
    func resetPeak() {
        peakBytesInUse = bytesInUse
    }

    /// Scratch space for at least `capacity` `uv_buf_t`s, valid until the next call (the caller
    /// hands it to `uv_try_write` or `uv_write`, which copies it, before anything else asks).
    func gatherBuffers(capacity: Int) -> UnsafeMutablePointer<uv_buf_t> {
        if capacity > gatherCapacity {
            gatherStorage.deallocate()
            gatherCapacity = max(capacity, gatherCapacity * 2)
            gatherStorage = .allocate(capacity: gatherCapacity)
        }
        return gatherStorage
    }
}
