import CLibUV
import KVOJSON

/// One client TCP connection: reads lines, buffers output, writes it in one gathered write per
/// loop iteration, and enforces the output-buffer limit.
///
/// Lifetime: the `uv_tcp_t` is allocated in `init` and its `data` retains this object until the
/// close callback. Output goes into chunks from the loop's `OutputChunkPool` (`ChunkedOutputBuffer`)
/// and leaves in one gathered write of all of them. At most one write is in flight; output produced
/// meanwhile accumulates in `pending` and goes out in one write when the previous one completes
/// (Redis-style coalescing).
/// A write request retains the connection until its callback, which libuv runs even after a close
/// (with UV_ECANCELED). Loop thread only.
final class Connection {
    let id: ConnectionID
    /// "127.0.0.1:50312", for logs.
    private(set) var peer = "?"
    let handle: UnsafeMutablePointer<uv_tcp_t>
    unowned let delegate: ConnectionDelegate
    private var framer: LineFramer
    private let maximumOutputBytes: Int
    /// The loop's limit on unfinished request lines, all connections together (`--max-total-input`).
    private let maximumTotalInputBytes: Int
    /// The loop, whose `bufferedInputBytes` this connection adds its framer's buffer to.
    private unowned let eventLoop: EventLoop
    /// What this connection has added to `eventLoop.bufferedInputBytes` (the length of its unfinished
    /// line; 0 once closing).
    @exclusivity(unchecked) private(set) var accountedInputBytes = 0
    /// Set by the server at the first complete request (connections without one are closed after
    /// `--first-request-timeout`).
    @exclusivity(unchecked) var hasSentRequest = false
    /// Who this connection acts for; nil until it authenticates when authentication is required.
    /// Set by the server (open mode: `.open` at accept). Setting it also replaces `access`'s principal
    /// (nil: no rights at all) and empties its cache; the server's `principalDidChange(of:)` then
    /// re-checks the connection's live observations. Loop thread only.
    var principal: Principal? {
        didSet { access.replace(principal ?? ConnectionAccess.nobody) }
    }
    /// The checks made for this connection's requests, with their per-object cache; shared with the
    /// engine's observations of this connection. Loop thread only.
    let access = ConnectionAccess(ConnectionAccess.nobody)
    /// Failed `auth` requests on this connection (closed at the server's limit).
    var authenticationFailures = 0
    /// Set while this connection's password check runs: its later requests wait (reading is
    /// stopped, and lines already read are held in `heldInput`) and are answered in order after.
    private(set) var isAwaitingVerification = false
    /// Bytes read after the line that started a password check, fed on once it is done (at most
    /// one read's worth).
    private var heldInput: [UInt8] = []

    // The hot per-event state is exempt from dynamic exclusivity checks: it is only ever touched
    // from the loop thread, by one call at a time.
    /// Output not yet handed to libuv.
    @exclusivity(unchecked) private var pending = ChunkedOutputBuffer()
    /// Output handed to libuv by the write in flight (empty when none); its chunks belong to libuv
    /// until the write callback.
    @exclusivity(unchecked) private var inFlight = ChunkedOutputBuffer()
    /// Where both buffers take their chunks from and give them back (the loop's, shared).
    private let chunkPool: OutputChunkPool
    private let writeRequest: UnsafeMutablePointer<uv_write_t>
    @exclusivity(unchecked) private var writeInFlight = false
    @exclusivity(unchecked) private(set) var isClosing = false
    /// Set while the connection is listed for this iteration's flush.
    @exclusivity(unchecked) var isScheduledForFlush = false
    /// Close once everything queued is written (used to reject a connection politely).
    private var closeAfterFlush: CloseReason?

    init(id: ConnectionID, loop: UnsafeMutablePointer<uv_loop_t>, delegate: ConnectionDelegate,
         maximumLineLength: Int, maximumOutputBytes: Int, maximumTotalInputBytes: Int = .max) {
        self.id = id
        self.delegate = delegate
        self.framer = LineFramer(maximumLineLength: maximumLineLength)
        self.maximumOutputBytes = maximumOutputBytes
        self.maximumTotalInputBytes = maximumTotalInputBytes
        let owner = EventLoop.owner(of: loop)
        self.eventLoop = owner
        self.chunkPool = owner.outputChunks
        self.handle = allocateHandle(uv_tcp_t.self, kind: UV_TCP)
        self.writeRequest = .allocate(capacity: 1)
        uv_tcp_init(loop, handle)
        retainOwner(self, in: handle)
    }

    deinit {
        writeRequest.deallocate()
        pending.release(returningTo: chunkPool)
        inFlight.release(returningTo: chunkPool)
    }

    /// Bytes queued and not yet acknowledged by the kernel.
    var outputBytes: Int { pending.count + inFlight.count }

    /// Bytes handed to libuv by the write in flight: still held after `close` until the write's
    /// callback (cancelled) gives the chunks back.
    var inFlightBytes: Int { inFlight.count }

    /// Called once accepted: records the peer, disables Nagle and starts reading.
    func start() -> Int32 {
        uv_tcp_nodelay(handle, 1)
        peer = peerName()
        return uv_read_start(asStream(handle), Connection.allocateCallback, Connection.readCallback)
    }

    // MARK: - Output

    /// Queues bytes for this iteration's write. Past the output limit the connection is closed.
    func enqueue(_ bytes: [UInt8]) {
        guard !isClosing else { return }
        pending.append(bytes, pool: chunkPool)
        didEnqueue()
    }

    /// Queues one event: the shared head (as three words), the subscription id and the shared tail.
    @inline(__always)
    func enqueueEvent(head: (UInt64, UInt64, UInt64), subscription: SubscriptionID, tail: UnsafeRawBufferPointer) {
        guard !isClosing else { return }
        pending.appendEventHead(head, subscription: subscription, pool: chunkPool)
        pending.append(tail, pool: chunkPool)
        didEnqueue()
    }

    private func didEnqueue() {
        if outputBytes > maximumOutputBytes {
            close(reason: .outputLimitExceeded(queued: outputBytes, limit: maximumOutputBytes))
            return
        }
        if !isScheduledForFlush {
            isScheduledForFlush = true
            delegate.connectionNeedsFlush(self)
        }
    }

    /// Sends `bytes`, then closes once they are written.
    func sendAndClose(_ bytes: [UInt8], reason: CloseReason) {
        enqueue(bytes)
        closeAfterFlush = reason
    }

    /// Hands pending output to libuv unless a write is already in flight (then it goes out when
    /// that write completes).
    func flush() {
        isScheduledForFlush = false
        guard !isClosing, !writeInFlight else { return }
        guard !pending.isEmpty else {
            if let reason = closeAfterFlush { close(reason: reason) }
            return
        }
        // First try to write it all now, without a request (no callback, nothing to keep): the
        // common case when the client keeps up. One `writev` over the chunks (libuv caps the count
        // at IOV_MAX; what it leaves out is simply not written yet).
        var buffers = chunkPool.gatherBuffers(capacity: pending.chunkCount)
        var bufferCount = pending.gather(into: buffers, capacity: pending.chunkCount)
        let written = uv_try_write(asStream(handle), buffers, UInt32(bufferCount))
        if written == Int32(clamping: pending.count) {
            pending.removeAll(returningTo: chunkPool)
            if let reason = closeAfterFlush { close(reason: reason) }
            return
        }
        if written < 0 && written != UV_EAGAIN.rawValue {
            close(reason: .socketError("write failed: \(uvErrorDescription(written))"))
            return
        }
        // The socket is full: hand the rest to libuv, which writes it when the socket drains. The
        // chunks written out go back to the pool now; the others belong to the write until its
        // callback (libuv copies the `uv_buf_t` array itself, not the bytes).
        if written > 0 { pending.consume(Int(written), returningTo: chunkPool) }
        swap(&pending, &inFlight)
        buffers = chunkPool.gatherBuffers(capacity: inFlight.chunkCount)
        bufferCount = inFlight.gather(into: buffers, capacity: inFlight.chunkCount)
        writeRequest.pointee.data = Unmanaged.passRetained(self).toOpaque()
        let status = uv_write(writeRequest, asStream(handle), buffers, UInt32(bufferCount), Connection.writeCallback)
        if status != 0 {
            // The callback will not run: balance the retain here.
            Unmanaged<Connection>.fromOpaque(writeRequest.pointee.data).release()
            inFlight.removeAll(returningTo: chunkPool)
            close(reason: .socketError("write failed: \(uvErrorDescription(status))"))
            return
        }
        writeInFlight = true
    }

    private func writeCompleted(status: Int32) {
        writeInFlight = false
        inFlight.removeAll(returningTo: chunkPool)
        if status < 0 {
            if status != UV_ECANCELED.rawValue { close(reason: .socketError("write failed: \(uvErrorDescription(status))")) }
            return
        }
        guard !pending.isEmpty || closeAfterFlush != nil else { return }
        // Output that piled up meanwhile goes out now, unless it may speak of writes not yet durable:
        // then at the end of this iteration, after the group commit. (Write callbacks run either in
        // the pending phase, when everything is committed, or in the poll phase, which the check
        // phase follows in the same iteration.)
        if delegate.mayWriteImmediately {
            flush()
        } else if !isScheduledForFlush {
            isScheduledForFlush = true
            delegate.connectionNeedsFlush(self)
        }
    }

    // MARK: - Closing

    /// Stops reading, drops queued output and closes the socket. The delegate hears of it at once
    /// (so no more output is routed here); the memory goes in the close callback. Idempotent.
    func close(reason: CloseReason) {
        guard !isClosing else { return }
        isClosing = true
        uv_read_stop(asStream(handle))
        pending.removeAll(returningTo: chunkPool)
        // The framer's buffer is freed with the connection (its close callback, next); it no longer
        // counts against the total (it may be in the middle of `feed`, so it is not touched here).
        eventLoop.bufferedInputBytes -= accountedInputBytes
        accountedInputBytes = 0
        delegate.connectionDidClose(self, reason: reason)
        closeHandle(handle)
    }

    // MARK: - Input

    private func received(_ bytes: UnsafeBufferPointer<UInt8>) {
        let consumed = framer.feed(bytes) { frame in
            guard !isClosing, closeAfterFlush == nil else { return false }
            switch frame {
            case let .line(line): delegate.connection(self, didReceiveLine: line)
            case .tooLarge: delegate.connectionDidReceiveOversizedLine(self)
            }
            return !isClosing && !isAwaitingVerification
        }
        if isAwaitingVerification, !isClosing, consumed < bytes.count {
            heldInput.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[consumed...]))
        }
        // Only a line split across reads changes the buffer: then count the change against the total.
        guard !isClosing, framer.bufferedCount != accountedInputBytes else { return }
        eventLoop.bufferedInputBytes += framer.bufferedCount - accountedInputBytes
        accountedInputBytes = framer.bufferedCount
        if eventLoop.bufferedInputBytes > maximumTotalInputBytes { delegate.connectionsPassedTotalInputLimit(self) }
    }

    // MARK: - Waiting for a password check

    /// Stops handling this connection's requests until `resumeAfterVerification()`: reading stops,
    /// and the rest of the current read is held. Called by the server while handling the `auth` line.
    func pauseForVerification() {
        guard !isClosing, !isAwaitingVerification else { return }
        isAwaitingVerification = true
        uv_read_stop(asStream(handle))
    }

    /// The password check is done (its reply queued): handles the held requests in order, then reads
    /// again (unless one of them started another check, or closed the connection).
    func resumeAfterVerification() {
        guard isAwaitingVerification else { return }
        isAwaitingVerification = false
        guard !isClosing else { return }
        if !heldInput.isEmpty {
            let held = heldInput
            heldInput = []
            held.withUnsafeBufferPointer { received($0) }
        }
        guard !isClosing, !isAwaitingVerification else { return }
        let status = uv_read_start(asStream(handle), Connection.allocateCallback, Connection.readCallback)
        if status != 0 { close(reason: .socketError("read start: \(uvErrorDescription(status))")) }
    }

    private func peerName() -> String {
        var storage = sockaddr_storage()
        var length = Int32(MemoryLayout<sockaddr_storage>.size)
        let status = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { uv_tcp_getpeername(handle, $0, &length) }
        }
        return status == 0 ? SocketAddress.describe(storage) : "?"
    }

    // MARK: - libuv callbacks (no captures: state comes through handle->data)

    private static let allocateCallback: uv_alloc_cb = { handle, _, buffer in
        let loop = EventLoop.owner(of: handle!.pointee.loop)
        buffer!.pointee = uv_buf_t(base: loop.readBuffer, len: EventLoop.readBufferSize)
    }

    private static let readCallback: uv_read_cb = { stream, count, _ in
        let connection = owner(of: UnsafeMutableRawPointer(stream!).assumingMemoryBound(to: uv_handle_t.self),
                               as: Connection.self)
        if count > 0 {
            let loop = EventLoop.owner(of: stream!.pointee.loop)
            let bytes = UnsafeBufferPointer(
                start: UnsafeRawPointer(loop.readBuffer).assumingMemoryBound(to: UInt8.self), count: count)
            connection.received(bytes)
        } else if count < 0 {
            // count == 0 is "nothing this time" (EAGAIN), not end of stream.
            let status = Int32(count)
            connection.close(reason: status == UV_EOF.rawValue ? .clientClosed : .socketError(uvErrorDescription(status)))
        }
    }

    private static let writeCallback: uv_write_cb = { request, status in
        let connection = Unmanaged<Connection>.fromOpaque(request!.pointee.data).takeRetainedValue()
        connection.writeCompleted(status: status)
    }
}
