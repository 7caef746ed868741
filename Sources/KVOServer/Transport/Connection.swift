import CLibUV
import KVOEngine
import KVOJSON
import KVOModel

/// One client connection, on any listener: reads bytes, frames them into requests for the delegate,
/// buffers output, writes it in one gathered write per loop iteration, and enforces the output-buffer limit.
///
/// Lifetime: the socket handle (`uv_tcp_t` or `uv_pipe_t`, made by the listener) holds in its `data` a
/// retained reference to this object until the close callback. Output goes into chunks from the loop's
/// `OutputChunkPool` (`ChunkedOutputBuffer`) and leaves in one gathered write of all of them. At most one
/// write is in flight; output produced meanwhile accumulates in `pending` and goes out in one write when
/// the previous one completes (Redis-style coalescing).
/// A write request retains the connection until its callback, which libuv runs even after a close
/// (with UV_ECANCELED). Loop thread only.
///
/// What the connection speaks is its stages (`ConnectionStages.swift`): a plain connection frames lines
/// with its `LineFramer` and writes `pending` as it is (the hot path, no dynamic call); a `transform`
/// (TLS) sits between the socket and the framing, turning reads into plaintext and, at each flush,
/// `pending` into its own output, which is what goes to the socket (both count against the output limit);
/// a `framing` (HTTP, then WebSocket) replaces lines.
///
/// Reading can be paused (`pauseReading(_:)`, for a `ReadPause` reason) and resumed: input already read
/// and not yet handled is held (`heldInput`, at most one read's worth, after the transform) and handed
/// out, in order, once every reason is lifted, before anything read later. The server pauses a connection
/// with `--max-pending-requests` replies not yet written to its socket (back-pressure on a client that
/// pipelines without reading).
final class Connection {
    let id: ConnectionID
    /// "127.0.0.1:50312" (or "unix:/run/kvod.sock"), for logs.
    private(set) var peer = "?"
    /// The socket: a `uv_tcp_t` or a `uv_pipe_t`, seen as a stream.
    let stream: UnsafeMutablePointer<uv_stream_t>
    private let socketKind: SocketKind
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
    /// When the server admitted it and when it last began handling a request of it (ms since 1970, the server's
    /// wall clock, `ServerClock.wallMilliseconds`; 0: none yet), for `clients`' age and idle time. Set by the server.
    var openedAt: Int64 = 0
    @exclusivity(unchecked) var lastRequestAt: Int64 = 0
    /// When bytes last arrived from the peer, and when the server last sent it a heartbeat (`ServerClock.milliseconds`:
    /// each read stores the loop's cached time; the idle sweep reads them, `Server+Liveness`). Loop thread only.
    @exclusivity(unchecked) var lastReceivedAt: UInt64 = 0
    var heartbeatSentAt: UInt64 = 0
    /// The event encoding observations made from now on get (`hello`'s `events`; full until then).
    /// Set by the server. Loop thread only.
    var eventEncoding: EventEncoding = .full
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
    /// The `signal`s this connection may send now (docs/protocol.md, "Signals"; `Server+Signals`).
    var signalTokens = TokenBucket.signals

    // The hot per-event state is exempt from dynamic exclusivity checks: it is only ever touched
    // from the loop thread, by one call at a time.
    /// Output not yet handed to libuv (or to the transform). Stages append to it (`enqueueRaw`).
    @exclusivity(unchecked) private(set) var pending = ChunkedOutputBuffer()
    /// Output handed to libuv by the write in flight (empty when none); its chunks belong to libuv
    /// until the write callback.
    @exclusivity(unchecked) private var inFlight = ChunkedOutputBuffer()
    /// Where both buffers take their chunks from and give them back (the loop's, shared).
    let chunkPool: OutputChunkPool
    private let writeRequest: UnsafeMutablePointer<uv_write_t>
    @exclusivity(unchecked) private var writeInFlight = false
    @exclusivity(unchecked) private(set) var isClosing = false
    /// Set while the connection is listed for this iteration's flush.
    @exclusivity(unchecked) var isScheduledForFlush = false
    /// Close once everything queued is written (used to reject a connection politely, and by stages).
    var closeAfterFlush: CloseReason?
    /// The byte transform between the socket and the framing (TLS); nil on plaintext connections.
    private let transform: ConnectionTransform?
    /// Bytes in the transform's output (0 without one), kept here so the per-event limit check stays one load.
    @exclusivity(unchecked) private var queuedTransformBytes = 0
    /// The framing that replaces lines (HTTP, WebSocket after an upgrade); nil on JSON-lines connections.
    @exclusivity(unchecked) private(set) var framing: MessageFraming?
    /// The request size limit (lines; WebSocket messages after an upgrade).
    let maximumLineLength: Int
    /// Whether a read has arrived yet (a plaintext connection's first bytes are checked for a TLS ClientHello).
    private var hasReceivedBytes = false
    /// Whether the delegate has heard that the transform is established (the TLS handshake completed).
    private var announcedEstablished = false

    /// Why reading is stopped (empty: reading, once started).
    @exclusivity(unchecked) private(set) var pausedReasons: ReadPause = []
    /// Whether libuv is reading this socket (`uv_read_start` called and not stopped).
    @exclusivity(unchecked) private var isReading = false
    /// Bytes read after the line during which reading was paused (plaintext on a TLS connection):
    /// from `heldStart` on, handed to the framer when reading resumes (`replayHeldInput()`), before
    /// anything read later. At most one read's worth (64 KiB, or the records decrypted from it);
    /// counted with the framer's buffer against `--max-total-input`. A replay that pauses again only
    /// moves `heldStart` (no copy per pause).
    @exclusivity(unchecked) private var heldInput: [UInt8] = []
    @exclusivity(unchecked) private var heldStart = 0
    /// Whether input read before a pause waits to be handed out.
    private var hasHeldInput: Bool { heldStart < heldInput.count || framing?.hasHeldInput == true }
    /// Most replies queued and not yet written to the socket before reading pauses (`.backPressure`).
    private let maximumPendingReplies: Int
    /// Replies queued and not yet handed to the socket (on TLS: until their ciphertext is).
    @exclusivity(unchecked) private var pendingReplies = 0
    /// Replies in the write in flight (handed to libuv, not yet all taken by the kernel).
    @exclusivity(unchecked) private var inFlightReplies = 0

    /// A connection on `socket` (initialized on `loop`, accepted or about to be), speaking through
    /// `transform` (nil: the bytes as they are) and `framing` (nil: JSON lines).
    init(id: ConnectionID, socket: UnsafeMutablePointer<uv_stream_t>, kind: SocketKind,
         loop: UnsafeMutablePointer<uv_loop_t>, delegate: ConnectionDelegate,
         maximumLineLength: Int, maximumOutputBytes: Int, maximumTotalInputBytes: Int = .max,
         maximumPendingReplies: Int = .max, transform: ConnectionTransform? = nil, framing: MessageFraming? = nil) {
        self.id = id
        self.delegate = delegate
        self.framer = LineFramer(maximumLineLength: maximumLineLength)
        self.maximumLineLength = maximumLineLength
        self.maximumOutputBytes = maximumOutputBytes
        self.maximumTotalInputBytes = maximumTotalInputBytes
        self.maximumPendingReplies = maximumPendingReplies
        let owner = EventLoop.owner(of: loop)
        self.eventLoop = owner
        self.chunkPool = owner.outputChunks
        self.transform = transform
        self.framing = framing
        self.stream = socket
        self.socketKind = kind
        self.writeRequest = .allocate(capacity: 1)
        retainOwner(self, in: socket)
    }

    deinit {
        writeRequest.deallocate()
        pending.release(returningTo: chunkPool)
        inFlight.release(returningTo: chunkPool)
    }

    /// Bytes queued and not yet acknowledged by the kernel (with a transform: bytes not yet transformed
    /// and its output not yet written, both).
    var outputBytes: Int { pending.count + inFlight.count + queuedTransformBytes }

    /// The `transport` metrics label of this connection as it is now (its outermost stage's).
    var metricsTransport: ConnectionKind {
        if let framing { return framing.metricsTransport }
        if let transform { return transform.metricsTransport }
        return socketKind.metricsTransport
    }

    /// True while a connection's transform is not set up (a TLS handshake not finished: the server closes
    /// it after `--tls-handshake-timeout`).
    var isAwaitingTLSHandshake: Bool { transform.map { !$0.isEstablished } ?? false }

    /// The subject common name (CN) of the client certificate this TLS connection presented, when the
    /// handshake verified it against `--tls-ca`; nil on plaintext connections, without a certificate, or
    /// when the subject has no single CN. Which kvod user the connection is follows from it (docs/protocol.md).
    var verifiedClientCommonName: String? { transform?.verifiedPeerName }

    /// Bytes handed to libuv by the write in flight: still held after `close` until the write's
    /// callback (cancelled) gives the chunks back.
    var inFlightBytes: Int { inFlight.count }

    /// Called once accepted: records the peer, disables Nagle (TCP) and starts reading.
    func start() -> Int32 {
        peer = socketKind.prepare(stream)
        let status = uv_read_start(stream, Connection.allocateCallback, Connection.readCallback)
        isReading = status == 0
        return status
    }

    // MARK: - Pausing input

    /// Stops reading for `reason` (until `resumeReading(reason)`). Takes effect at once: called while a
    /// line is being handled, the lines after it in the same read are held, not handed out. Pausing
    /// for a reason already in force changes nothing. While paused, nothing is read, so the kernel's
    /// buffers fill and a client that keeps sending is slowed by TCP's flow control; the connection
    /// is never closed for it.
    func pauseReading(_ reason: ReadPause) {
        guard !isClosing else { return }
        pausedReasons.insert(reason)
        if isReading {
            uv_read_stop(stream)
            isReading = false
        }
    }

    /// Lifts `reason`. When no reason is left, held lines are handed out first (by the delegate, at a
    /// point where no request is being handled: `connectionHasHeldInput`, then `replayHeldInput()`)
    /// and reading starts again. Lifting a reason that is not in force changes nothing.
    func resumeReading(_ reason: ReadPause) {
        guard !isClosing, pausedReasons.contains(reason) else { return }
        pausedReasons.remove(reason)
        guard pausedReasons.isEmpty else { return }
        if !hasHeldInput {
            startReading()
        } else {
            delegate.connectionHasHeldInput(self)
        }
    }

    /// Hands the held lines to the delegate (they may pause reading again, holding the rest), then
    /// starts reading if nothing paused it. Called by the delegate, never while it handles a line.
    func replayHeldInput() {
        guard !isClosing, pausedReasons.isEmpty else { return }
        if hasHeldInput {
            let consumed = heldInput.withUnsafeBufferPointer { feedInput(UnsafeBufferPointer(rebasing: $0[heldStart...])) }
            heldStart += consumed
            if isClosing || closeAfterFlush != nil || !hasHeldInput {
                heldInput = []
                heldStart = 0
            }
            accountBufferedInput()
        }
        if pausedReasons.isEmpty, !hasHeldInput { startReading() }
    }

    private func startReading() {
        guard !isClosing, !isReading else { return }
        let status = uv_read_start(stream, Connection.allocateCallback, Connection.readCallback)
        guard status == 0 else {
            close(reason: .socketError("read start: \(uvErrorDescription(status))"))
            return
        }
        isReading = true
    }

    /// Replies queued and not yet written to the socket.
    var unwrittenReplies: Int { pendingReplies + inFlightReplies }

    /// After output was written: lifts the back-pressure pause once the replies and bytes waiting are
    /// below its bounds.
    private func relieveBackPressure() {
        if pausedReasons.contains(.backPressure), !isBackedUp {
            resumeReading(.backPressure)
        }
    }

    // MARK: - Output

    /// Queues bytes for this iteration's write (one protocol message, newline included: a framing may
    /// wrap it, e.g. as one WebSocket text frame without the newline). Past the output limit the
    /// connection is closed.
    func enqueue(_ bytes: [UInt8]) {
        guard !isClosing else { return }
        if let framing {
            let queued = bytes.withUnsafeBytes { framing.enqueueMessage($0, into: &pending, pool: chunkPool) }
            guard queued else { return }
        } else {
            pending.append(bytes, pool: chunkPool)
        }
        didEnqueue()
    }

    /// Queues bytes as they are, past any framing (an HTTP response, a framing's control frame).
    func enqueueRaw(_ bytes: UnsafeRawBufferPointer) {
        guard !isClosing else { return }
        pending.append(bytes, pool: chunkPool)
        didEnqueue()
    }

    /// Queues the reply to one request. With `maximumPendingReplies` replies not yet written to the
    /// socket, or half the output limit queued, reading pauses (`.backPressure`) until they drain, so
    /// a client that pipelines requests without reading is slowed rather than closed as a slow consumer.
    func enqueueReply(_ bytes: [UInt8]) {
        guard !isClosing else { return }
        pendingReplies += 1
        enqueue(bytes)
        if isBackedUp { pauseReading(.backPressure) }
    }

    /// Whether replies wait to be written past the back-pressure bounds: `maximumPendingReplies`
    /// replies, or half of `maximumOutputBytes` queued.
    private var isBackedUp: Bool {
        unwrittenReplies >= maximumPendingReplies || outputBytes >= maximumOutputBytes / 2
    }

    /// Queues one event: the shared head (as three words, of which `headLength` bytes count), the
    /// subscription id and the shared tail.
    @inline(__always)
    func enqueueEvent(head: (UInt64, UInt64, UInt64), headLength: Int, subscription: SubscriptionID,
                      tail: UnsafeRawBufferPointer) {
        guard !isClosing else { return }
        if let framing {
            guard framing.enqueueEvent(head: head, headLength: headLength, subscription: subscription, tail: tail,
                                       into: &pending, pool: chunkPool)
            else { return }
        } else {
            pending.appendEventHead(head, headLength: headLength, subscription: subscription, pool: chunkPool)
            pending.append(tail, pool: chunkPool)
        }
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

    /// Sends `bytes`, then closes once they are written (a framing may say goodbye first: on a WebSocket
    /// connection, a close frame, code 1008).
    func sendAndClose(_ bytes: [UInt8], reason: CloseReason) {
        enqueue(bytes)
        if let framing, !isClosing, let failure = framing.willClose(after: reason) {
            close(reason: failure)
            return
        }
        closeAfterFlush = reason
    }

    /// Switches to another framing (an HTTP connection upgrading to WebSocket): bytes read from now on,
    /// and those after the current request in this read, go to `newFraming`.
    func replaceFraming(with newFraming: MessageFraming) {
        framing = newFraming
    }

    /// Hands pending output to libuv unless a write is already in flight (then it goes out when
    /// that write completes).
    func flush() {
        isScheduledForFlush = false
        guard !isClosing, !writeInFlight else { return }
        framing?.willFlush(into: &pending, pool: chunkPool)
        let failure: Int32?
        if let transform {
            // Queued output is transformed here, once per flush. What the transform cannot take yet (a
            // TLS handshake unfinished) stays in `pending` until the next read.
            if !pending.isEmpty, case let .failed(reason) = transform.send(&pending, loop: eventLoop) {
                noteTransformOutput()
                close(reason: reason)
                return
            }
            failure = transform.withOutput { write(&$0) }
            noteTransformOutput()
        } else {
            failure = write(&pending)
        }
        if let failure {
            close(reason: .socketError("write failed: \(uvErrorDescription(failure))"))
            return
        }
        // The replies queued are now written, or in the write in flight (plaintext a TLS handshake
        // still holds back keeps them counted).
        if pending.isEmpty {
            if writeInFlight { inFlightReplies += pendingReplies }
            pendingReplies = 0
        }
        if !writeInFlight, pending.isEmpty, let reason = closeAfterFlush {
            close(reason: reason)
            return
        }
        relieveBackPressure()
    }

    /// Writes `output` (`pending`, or the transform's output): first all of it at once without a request,
    /// else the rest through `uv_write` (then `inFlight` holds it until the callback). Returns the libuv
    /// status of a failed write, nil otherwise. Closes nothing itself.
    private func write(_ output: inout ChunkedOutputBuffer) -> Int32? {
        guard !output.isEmpty else { return nil }
        // First try to write it all now, without a request (no callback, nothing to keep): the
        // common case when the client keeps up. One `writev` over the chunks (libuv caps the count
        // at IOV_MAX; what it leaves out is simply not written yet).
        var buffers = chunkPool.gatherBuffers(capacity: output.chunkCount)
        var bufferCount = output.gather(into: buffers, capacity: output.chunkCount)
        let written = uv_try_write(stream, buffers, UInt32(bufferCount))
        if written == Int32(clamping: output.count) {
            output.removeAll(returningTo: chunkPool)
            return nil
        }
        if written < 0 && written != UV_EAGAIN.rawValue { return written }
        // The socket is full: hand the rest to libuv, which writes it when the socket drains. The
        // chunks written out go back to the pool now; the others belong to the write until its
        // callback (libuv copies the `uv_buf_t` array itself, not the bytes).
        if written > 0 { output.consume(Int(written), returningTo: chunkPool) }
        swap(&output, &inFlight)
        buffers = chunkPool.gatherBuffers(capacity: inFlight.chunkCount)
        bufferCount = inFlight.gather(into: buffers, capacity: inFlight.chunkCount)
        writeRequest.pointee.data = Unmanaged.passRetained(self).toOpaque()
        let status = uv_write(writeRequest, stream, buffers, UInt32(bufferCount), Connection.writeCallback)
        if status != 0 {
            // The callback will not run: balance the retain here.
            Unmanaged<Connection>.fromOpaque(writeRequest.pointee.data).release()
            inFlight.removeAll(returningTo: chunkPool)
            return status
        }
        writeInFlight = true
        return nil
    }

    /// Brings `queuedTransformBytes` up to date after a transform call.
    @inline(__always)
    private func noteTransformOutput() {
        queuedTransformBytes = transform?.outputCount ?? 0
    }

    /// Lists the connection for this iteration's flush (unless listed already).
    func scheduleFlush() {
        if !isScheduledForFlush {
            isScheduledForFlush = true
            delegate.connectionNeedsFlush(self)
        }
    }

    func writeCompleted(status: Int32) {
        writeInFlight = false
        inFlight.removeAll(returningTo: chunkPool)
        inFlightReplies = 0
        if status < 0 {
            if status != UV_ECANCELED.rawValue { close(reason: .socketError("write failed: \(uvErrorDescription(status))")) }
            return
        }
        relieveBackPressure()
        guard !pending.isEmpty || queuedTransformBytes > 0 || closeAfterFlush != nil else { return }
        // Output that piled up meanwhile goes out now, unless it may speak of writes not yet durable:
        // then at the end of this iteration, after the group commit. (Write callbacks run either in
        // the pending phase, when everything is committed, or in the poll phase, which the check
        // phase follows in the same iteration.)
        if delegate.mayWriteImmediately {
            flush()
        } else {
            scheduleFlush()
        }
    }

    // MARK: - Closing

    /// Stops reading, drops queued output and closes the socket. The delegate hears of it at once
    /// (so no more output is routed here); the memory goes in the close callback. Idempotent.
    func close(reason: CloseReason) {
        guard !isClosing else { return }
        isClosing = true
        uv_read_stop(stream)
        isReading = false
        pending.removeAll(returningTo: chunkPool)
        if let transform {
            sendFinalTransformBytes(transform, reason: reason)
        } else if let framing, let last = framing.lastBytes(closing: reason), !writeInFlight {
            // Offered once, without waiting (queued output was dropped; a write in flight would interleave).
            var bytes = last
            bytes.withUnsafeMutableBytes { raw in
                var buffer = uv_buf_t(base: raw.baseAddress!.assumingMemoryBound(to: CChar.self), len: raw.count)
                _ = uv_try_write(stream, &buffer, 1)
            }
        }
        // The framer's buffer is freed with the connection (its close callback, next); it no longer
        // counts against the total (it may be in the middle of `feed`, so it is not touched here).
        eventLoop.bufferedInputBytes -= accountedInputBytes
        accountedInputBytes = 0
        delegate.connectionDidClose(self, reason: reason)
        closeHandle(stream)
    }

    /// On closing a connection with a transform: lets it queue its last bytes (TLS close_notify, unless
    /// the peer left or the socket failed), then offers what it has queued (that alert, or the alert of a
    /// failed handshake) to the socket once, without waiting: the socket is closed right after, and the
    /// peer's answer is not awaited.
    private func sendFinalTransformBytes(_ transform: ConnectionTransform, reason: CloseReason) {
        transform.finish(reason: reason)
        let chunkPool = chunkPool
        let stream = stream
        let writeInFlight = writeInFlight
        transform.withOutput { output in
            if !writeInFlight, !output.isEmpty {
                let buffers = chunkPool.gatherBuffers(capacity: output.chunkCount)
                let count = output.gather(into: buffers, capacity: output.chunkCount)
                _ = uv_try_write(stream, buffers, UInt32(count))
            }
            output.removeAll(returningTo: chunkPool)
        }
        queuedTransformBytes = 0
    }

    // MARK: - Input

    func received(_ bytes: UnsafeBufferPointer<UInt8>) {
        if let transform {
            receivedThroughTransform(bytes, transform)
            return
        }
        if !hasReceivedBytes {
            hasReceivedBytes = true
            // A TLS handshake record (type 22, version 3.x) is no JSON line: say so instead of `bad_request`.
            // So is another TLS record (an alert, type 21, …), named (no JSON line starts with a control byte).
            if bytes.count >= 2, bytes[0] == TLSSession.handshakeRecordType, bytes[1] == 0x03 {
                close(reason: .tlsOnPlainPort(nil))
                return
            }
            if bytes.count >= 2, bytes[1] == 0x03, bytes[0] < 0x20, let record = TLSRecordHeader.recordName(Array(bytes.prefix(7))) {
                close(reason: .tlsOnPlainPort(record))
                return
            }
        }
        frame(bytes)
    }

    /// Passes what the client sent through the transform (decrypts it) and frames the result. Any output
    /// the calls produced (handshake flight, session tickets, a KeyUpdate answer, an alert), and output an
    /// earlier flush could not transform before the handshake, are written at this iteration's flush.
    private func receivedThroughTransform(_ bytes: UnsafeBufferPointer<UInt8>, _ transform: ConnectionTransform) {
        let wasEstablishing = !transform.isEstablished
        let outcome = transform.receive(bytes, loop: eventLoop) { input in
            if wasEstablishing, !announcedEstablished {
                // Before the first request of a client that sent it with its handshake's last flight.
                announcedEstablished = true
                delegate.connectionDidCompleteTLSHandshake(self)
            }
            // Paused by a line of an earlier record: the rest is held (decrypting goes on, so the
            // records of this read are all taken from OpenSSL; no more is read until resumed).
            frame(input)
            return !isClosing && closeAfterFlush == nil
        }
        guard !isClosing else { return }
        if wasEstablishing, transform.isEstablished, !announcedEstablished {
            announcedEstablished = true
            delegate.connectionDidCompleteTLSHandshake(self)
            guard !isClosing else { return }
        }
        noteTransformOutput()
        switch outcome {
        case .proceed: break
        case .peerClosed:
            close(reason: .clientClosed)
            return
        case let .failed(reason):
            close(reason: reason)
            return
        }
        if queuedTransformBytes > 0 || (!pending.isEmpty && transform.isEstablished) { scheduleFlush() }
    }

    /// Splits plaintext into lines for the delegate; what arrives while reading is paused, or after the
    /// line that paused it, is held for `replayHeldInput()`.
    private func frame(_ bytes: UnsafeBufferPointer<UInt8>) {
        let consumed = pausedReasons.isEmpty && !hasHeldInput ? feedInput(bytes) : 0
        if consumed < bytes.count, !isClosing, closeAfterFlush == nil, !pausedReasons.isEmpty || hasHeldInput {
            if !hasHeldInput {
                heldInput.removeAll(keepingCapacity: true)
                heldStart = 0
            }
            heldInput.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[consumed...]))
        }
        accountBufferedInput()
    }

    /// Hands what `bytes` hold (lines, or the framing's requests or messages) to the delegate until the
    /// connection closes or pauses; returns how many bytes were consumed.
    private func feedInput(_ bytes: UnsafeBufferPointer<UInt8>) -> Int {
        if let framing { return framing.feed(bytes, on: self) }
        return feedLines(bytes)
    }

    /// Whether the delegate may be handed another request now (not closing, not about to close, not paused).
    var acceptsInput: Bool { !isClosing && closeAfterFlush == nil && pausedReasons.isEmpty }

    /// Hands the lines in `bytes` to the delegate until the connection closes or pauses; returns how
    /// many bytes were consumed.
    private func feedLines(_ bytes: UnsafeBufferPointer<UInt8>) -> Int {
        framer.feed(bytes) { frame in
            guard !isClosing, closeAfterFlush == nil else { return false }
            switch frame {
            case let .line(line): delegate.connection(self, didReceiveLine: line)
            case .tooLarge: delegate.connectionDidReceiveOversizedLine(self)
            }
            return !isClosing && pausedReasons.isEmpty
        }
    }

    /// Counts a change in the bytes held for this connection's input (an unfinished line, lines held
    /// while paused) against the loop's total. Only a line split across reads or a pause changes it.
    private func accountBufferedInput() {
        let buffered = framer.bufferedCount + heldInput.count - heldStart + (framing?.bufferedCount ?? 0)
        guard !isClosing, buffered != accountedInputBytes else { return }
        eventLoop.bufferedInputBytes += buffered - accountedInputBytes
        accountedInputBytes = buffered
        if eventLoop.bufferedInputBytes > maximumTotalInputBytes { delegate.connectionsPassedTotalInputLimit(self) }
    }
}
