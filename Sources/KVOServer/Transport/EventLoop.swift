import CLibUV
#if canImport(Glibc)
import Glibc
import KVOEngine
import KVOModel
#endif

/// Owns one `uv_loop_t`, the read buffer every connection on it shares, the pool their output
/// chunks come from, and the clock their reads are stamped with.
///
/// Reads are handled synchronously inside the read callback, so one buffer per loop is enough and
/// no read allocates. `loop->data` points (unretained) at this object. Create, run and close on
/// one thread, the loop thread; `close()` must come after `run()` returned.
final class EventLoop {
    /// Size of the shared read buffer. 64 KiB: 256 KiB once raised S = 100, B = 64 by 20-40 % but halved
    /// B = 1,024 (output buffers re-grown every iteration); with chunked output buffers and the early
    /// flush it no longer hurt B = 1,024 but gained nothing measurable either (libuv reads up to 32
    /// times per readable socket in one go anyway; docs/performance.md).
    static let readBufferSize = 64 * 1024

    let raw: UnsafeMutablePointer<uv_loop_t>
    let readBuffer: UnsafeMutablePointer<CChar>
    /// Where TLS connections decrypt into (`SSL_read`): one record's plaintext at most, 16 KiB. Shared
    /// like `readBuffer`: used only within one connection's read callback.
    let tlsPlaintextBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 * 1024, alignment: 16)
    /// Where a TLS connection's flush packs small output chunks into one record before `SSL_write` (16 KiB).
    /// Separate from `tlsPlaintextBuffer`: a flush can run while a read's plaintext is being framed.
    let tlsStagingBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 * 1024, alignment: 16)
    /// Every connection's output chunks: a 512-byte first chunk (a reply or an event), then 16 KiB
    /// ones (as Redis's reply chunks), and up to 1,024 free ones of each size kept for the next
    /// burst once written out (16.5 MiB). 4 KiB chunks cost 6-9 % more CPU per delivery; full-size
    /// first chunks made 10,000 clients' first replies need up to 160 MB at once (docs/performance.md).
    let outputChunks = OutputChunkPool(firstChunkSize: 512, chunkSize: 16 * 1024, retainedChunkLimit: 1024)
    /// Bytes every connection on this loop holds for unfinished request lines (`LineFramer` buffers),
    /// counted by each connection when a read changes its buffer; held to `--max-total-input`.
    @exclusivity(unchecked) var bufferedInputBytes = 0
    /// The server's clock (`ServerClock`): each read stamps its connection's `lastReceivedAt` with its
    /// `milliseconds` (on the system clock a load of libuv's cached loop time, no system call).
    let clock: ServerClock
    private var isClosed = false
    private var loopThread: pthread_t?

    init(clock: ServerClock) throws(TransportError) {
        self.clock = clock
        raw = .allocate(capacity: 1)
        readBuffer = .allocate(capacity: EventLoop.readBufferSize)
        let status = uv_loop_init(raw)
        guard status == 0 else {
            raw.deallocate()
            readBuffer.deallocate()
            tlsPlaintextBuffer.deallocate()
            tlsStagingBuffer.deallocate()
            throw TransportError(operation: "uv_loop_init", status: status)
        }
        raw.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        // For `kvod_loop_iteration_seconds`: two clock reads around each poll.
        _ = kvod_uv_loop_measure_idle_time(raw)
    }

    deinit {
        if !isClosed { _ = uv_loop_close(raw) }
        raw.deallocate()
        readBuffer.deallocate()
        tlsPlaintextBuffer.deallocate()
        tlsStagingBuffer.deallocate()
    }

    /// The `EventLoop` that owns `loop`.
    @inline(__always)
    static func owner(of loop: UnsafeMutablePointer<uv_loop_t>) -> EventLoop {
        Unmanaged<EventLoop>.fromOpaque(loop.pointee.data).takeUnretainedValue()
    }

    /// Runs until no active handle is left.
    func run() {
        loopThread = pthread_self()
        uv_run(raw, UV_RUN_DEFAULT)
    }

    /// True on the thread running the loop (or before it runs).
    var isOnLoopThread: Bool {
        guard let loopThread else { return true }
        return pthread_equal(loopThread, pthread_self()) != 0
    }

    /// Descriptions of handles still open (types), for diagnosing a loop that will not close.
    func openHandles() -> [String] {
        final class Collector { var names: [String] = [] }
        let collector = Collector()
        withExtendedLifetime(collector) {
            uv_walk(raw, { handle, context in
                let collector = Unmanaged<Collector>.fromOpaque(context!).takeUnretainedValue()
                let name = String(cString: uv_handle_type_name(handle!.pointee.type))
                let state = uv_is_closing(handle) != 0 ? "closing" : "open"
                collector.names.append("\(name) (\(state))")
            }, Unmanaged.passUnretained(collector).toOpaque())
        }
        return collector.names
    }

    /// `uv_loop_close`: 0 when every handle was closed, UV_EBUSY when one leaked.
    func close() -> Int32 {
        let status = uv_loop_close(raw)
        if status == 0 { isClosed = true }
        return status
    }
}
