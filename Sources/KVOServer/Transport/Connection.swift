import CLibUV
import KVOEngine
import KVOJSON
import KVOModel

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
///
/// On the TLS listener a `TLSSession` sits between the socket and the framer: received bytes are
/// decrypted before framing, and at each flush the queued plaintext (`pending`) is encrypted into the
/// session's `ciphertext`, which is what goes to the socket. Both count against the output limit, and
/// the write path (one try-write, else one `uv_write`) is the same.
///
/// Reading can be paused (`pauseReading(_:)`, for a `ReadPause` reason) and resumed: lines already read
/// and not yet handled are held (`heldInput`, at most one read's worth, decrypted on a TLS connection)
/// and handed out, in order, once every reason is lifted, before anything read later. The server
/// pauses a connection with `--max-pending-requests` replies not yet written to its socket
/// (back-pressure on a client that pipelines without reading).
///
/// On the HTTP listener the framer is an `HTTPRequestParser` instead of the `LineFramer`: each request is
/// handed to the delegate (`didReceiveHTTPRequest`), which answers it (`sendHTTPResponse`) or upgrades
/// the connection to WebSocket (`upgradeToWebSocket`). From then on a `WebSocketSession` (wslay) turns
/// frames into messages, each handed to the delegate exactly as a line would be, and everything queued
/// for the connection (replies, events, notices) leaves as one text frame per message: the connection
/// writes the frame header in front of the same bytes a TCP client gets, less their newline.
final class Connection: WebSocketSessionOwner {
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
    /// The TLS layer, on connections accepted by the TLS listener; nil on plaintext ones.
    private let tls: TLSSession?
    /// Bytes in `tls.ciphertext` (0 without TLS), kept here so the per-event limit check stays one load.
    @exclusivity(unchecked) private var queuedCiphertextBytes = 0
    /// On the HTTP listener, until an upgrade: the request parser (nil on JSON-lines connections).
    private var httpParser: HTTPRequestParser?
    /// After a WebSocket upgrade: the session that frames input and control output.
    @exclusivity(unchecked) private(set) var webSocket: WebSocketSession?
    /// Set once a WebSocket close frame is queued or sent: no data frame may follow it.
    @exclusivity(unchecked) private var webSocketOutputEnded = false
    /// The request size limit, which becomes the WebSocket message limit on upgrade.
    private let maximumLineLength: Int
    /// Whether a read has arrived yet (a plaintext connection's first bytes are checked for a TLS ClientHello).
    private var hasReceivedBytes = false
    /// Whether the delegate has heard that the TLS handshake completed.
    private var announcedHandshake = false

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
    /// Whether lines (or WebSocket messages) read before a pause wait to be handed out.
    private var hasHeldInput: Bool { heldStart < heldInput.count || webSocket?.hasHeldMessages == true }
    /// Most replies queued and not yet written to the socket before reading pauses (`.backPressure`).
    private let maximumPendingReplies: Int
    /// Replies queued and not yet handed to the socket (on TLS: until their ciphertext is).
    @exclusivity(unchecked) private var pendingReplies = 0
    /// Replies in the write in flight (handed to libuv, not yet all taken by the kernel).
    @exclusivity(unchecked) private var inFlightReplies = 0

    /// With `tls`, the connection speaks TLS from that context (the TLS listener's current one); with
    /// `http`, it speaks HTTP/1.1 with those limits (the HTTP listener's connections).
    init(id: ConnectionID, loop: UnsafeMutablePointer<uv_loop_t>, delegate: ConnectionDelegate,
         maximumLineLength: Int, maximumOutputBytes: Int, maximumTotalInputBytes: Int = .max,
         maximumPendingReplies: Int = .max, tls: TLSContext? = nil, http: HTTPRequestParser.Limits? = nil) {
        self.id = id
        self.delegate = delegate
        self.framer = LineFramer(maximumLineLength: maximumLineLength)
        self.maximumLineLength = maximumLineLength
        self.httpParser = http.map(HTTPRequestParser.init(limits:))
        self.maximumOutputBytes = maximumOutputBytes
        self.maximumTotalInputBytes = maximumTotalInputBytes
        self.maximumPendingReplies = maximumPendingReplies
        let owner = EventLoop.owner(of: loop)
        self.eventLoop = owner
        self.chunkPool = owner.outputChunks
        if let tls {
            guard let session = TLSSession(context: tls, pool: owner.outputChunks) else {
                fatalError("out of memory creating a TLS session")
            }
            self.tls = session
        } else {
            self.tls = nil
        }
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

    /// Bytes queued and not yet acknowledged by the kernel (with TLS: plaintext not yet encrypted and
    /// ciphertext not yet written, both).
    var outputBytes: Int { pending.count + inFlight.count + queuedCiphertextBytes }

    /// Whether this connection came through the TLS listener.
    var isTLS: Bool { tls != nil }

    /// Whether this connection came through the HTTP listener (upgraded to WebSocket or not).
    var isHTTP: Bool { httpParser != nil || webSocket != nil }

    /// True while a TLS connection has not finished its handshake (the server closes it after
    /// `--tls-handshake-timeout`).
    var isAwaitingTLSHandshake: Bool { tls.map { !$0.isHandshakeComplete } ?? false }

    /// The subject common name (CN) of the client certificate this TLS connection presented, when the
    /// handshake verified it against `--tls-ca`; nil on plaintext connections, without a certificate, or
    /// when the subject has no single CN. Which kvod user the connection is follows from it (docs/protocol.md).
    var verifiedClientCommonName: String? { tls?.verifiedPeerCommonName }

    /// Bytes handed to libuv by the write in flight: still held after `close` until the write's
    /// callback (cancelled) gives the chunks back.
    var inFlightBytes: Int { inFlight.count }

    /// Called once accepted: records the peer, disables Nagle and starts reading.
    func start() -> Int32 {
        uv_tcp_nodelay(handle, 1)
        peer = peerName()
        let status = uv_read_start(asStream(handle), Connection.allocateCallback, Connection.readCallback)
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
            uv_read_stop(asStream(handle))
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
        let status = uv_read_start(asStream(handle), Connection.allocateCallback, Connection.readCallback)
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

    /// Queues bytes for this iteration's write (one protocol message, newline included: on a WebSocket
    /// connection it becomes one text frame without the newline). Past the output limit the connection
    /// is closed.
    func enqueue(_ bytes: [UInt8]) {
        guard !isClosing else { return }
        if webSocket != nil {
            guard !webSocketOutputEnded else { return }
            let payload = bytes.last == 0x0A ? bytes.count - 1 : bytes.count
            pending.appendWebSocketTextFrameHeader(payloadLength: payload, pool: chunkPool)
            bytes.withUnsafeBytes { pending.append(UnsafeRawBufferPointer(rebasing: $0[0..<payload]), pool: chunkPool) }
        } else {
            pending.append(bytes, pool: chunkPool)
        }
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
        if webSocket != nil {
            guard !webSocketOutputEnded else { return }
            // The tail ends with the newline a JSON-lines client needs and a frame does not.
            let payload = headLength + ChunkedOutputBuffer.decimalLength(subscription) + tail.count - 1
            pending.appendWebSocketTextFrameHeader(payloadLength: payload, pool: chunkPool)
            pending.appendEventHead(head, headLength: headLength, subscription: subscription, pool: chunkPool)
            pending.append(UnsafeRawBufferPointer(rebasing: tail[0..<(tail.count - 1)]), pool: chunkPool)
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

    /// Sends `bytes`, then closes once they are written (on a WebSocket connection, after a close frame,
    /// code 1008).
    func sendAndClose(_ bytes: [UInt8], reason: CloseReason) {
        enqueue(bytes)
        if let webSocket, !webSocketOutputEnded {
            webSocket.queueClose(code: 1008, reason: "\(reason)")
            webSocketOutputEnded = true
            if !webSocket.flush() {
                close(reason: .webSocketFailed)
                return
            }
        }
        closeAfterFlush = reason
    }

    // MARK: - HTTP

    /// Queues an HTTP response (raw bytes, on a connection not upgraded); without `keepAlive` the
    /// connection closes once it is written, for `reason` (default: the response said `Connection: close`).
    func sendHTTPResponse(_ bytes: [UInt8], keepAlive: Bool, reason: CloseReason = .httpResponseComplete) {
        guard !isClosing, webSocket == nil else { return }
        pending.append(bytes, pool: chunkPool)
        didEnqueue()
        if !keepAlive { closeAfterFlush = reason }
    }

    /// Answers a WebSocket upgrade with 101 and switches the connection to WebSocket framing: from now on
    /// the delegate gets messages as lines, and everything queued leaves as text frames. Returns false
    /// (the connection closes) when wslay cannot allocate its context.
    func upgradeToWebSocket(accept: String) -> Bool {
        guard !isClosing, httpParser != nil else { return false }
        sendHTTPResponse(HTTPResponse.switchingToWebSocket(accept: accept), keepAlive: true)
        guard let session = WebSocketSession(owner: self, maximumMessageBytes: maximumLineLength) else {
            close(reason: .webSocketFailed)
            return false
        }
        httpParser = nil
        webSocket = session
        return true
    }

    /// Hands pending output to libuv unless a write is already in flight (then it goes out when
    /// that write completes).
    func flush() {
        isScheduledForFlush = false
        guard !isClosing, !writeInFlight else { return }
        let failure: Int32?
        if let tls {
            // Plaintext becomes ciphertext here, once per flush. What an `SSL_write` wanting a read
            // (handshake unfinished) left stays in `pending` until the next read.
            if !pending.isEmpty, case let .failed(reason) = tls.encrypt(&pending, staging: eventLoop.tlsStagingBuffer) {
                noteCiphertext()
                close(reason: .tlsError(reason))
                return
            }
            failure = write(&tls.ciphertext)
            noteCiphertext()
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

    /// Writes `output` (the plaintext, or the TLS session's ciphertext): first all of it at once without a
    /// request, else the rest through `uv_write` (then `inFlight` holds it until the callback). Returns the
    /// libuv status of a failed write, nil otherwise. Closes nothing itself.
    private func write(_ output: inout ChunkedOutputBuffer) -> Int32? {
        guard !output.isEmpty else { return nil }
        // First try to write it all now, without a request (no callback, nothing to keep): the
        // common case when the client keeps up. One `writev` over the chunks (libuv caps the count
        // at IOV_MAX; what it leaves out is simply not written yet).
        var buffers = chunkPool.gatherBuffers(capacity: output.chunkCount)
        var bufferCount = output.gather(into: buffers, capacity: output.chunkCount)
        let written = uv_try_write(asStream(handle), buffers, UInt32(bufferCount))
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
        let status = uv_write(writeRequest, asStream(handle), buffers, UInt32(bufferCount), Connection.writeCallback)
        if status != 0 {
            // The callback will not run: balance the retain here.
            Unmanaged<Connection>.fromOpaque(writeRequest.pointee.data).release()
            inFlight.removeAll(returningTo: chunkPool)
            return status
        }
        writeInFlight = true
        return nil
    }

    /// Brings `queuedCiphertextBytes` up to date after a TLS call.
    @inline(__always)
    private func noteCiphertext() {
        queuedCiphertextBytes = tls?.ciphertext.count ?? 0
    }

    /// Lists the connection for this iteration's flush (unless listed already).
    private func scheduleFlush() {
        if !isScheduledForFlush {
            isScheduledForFlush = true
            delegate.connectionNeedsFlush(self)
        }
    }

    private func writeCompleted(status: Int32) {
        writeInFlight = false
        inFlight.removeAll(returningTo: chunkPool)
        inFlightReplies = 0
        if status < 0 {
            if status != UV_ECANCELED.rawValue { close(reason: .socketError("write failed: \(uvErrorDescription(status))")) }
            return
        }
        relieveBackPressure()
        guard !pending.isEmpty || queuedCiphertextBytes > 0 || closeAfterFlush != nil else { return }
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
        uv_read_stop(asStream(handle))
        isReading = false
        pending.removeAll(returningTo: chunkPool)
        if let tls { sendFinalTLSRecords(tls, reason: reason) }
        if webSocket != nil, !webSocketOutputEnded, tls == nil { sendFinalWebSocketClose(reason: reason) }
        // The framer's buffer is freed with the connection (its close callback, next); it no longer
        // counts against the total (it may be in the middle of `feed`, so it is not touched here).
        eventLoop.bufferedInputBytes -= accountedInputBytes
        accountedInputBytes = 0
        delegate.connectionDidClose(self, reason: reason)
        closeHandle(handle)
    }

    /// On closing a WebSocket connection for a reason of the server's: offers a close frame (1001 when
    /// the server stops, 1008 for a broken limit, 1011 otherwise) to the socket once, without waiting,
    /// as `sendFinalTLSRecords` does (queued output was dropped; a write in flight would interleave).
    private func sendFinalWebSocketClose(reason: CloseReason) {
        let code: UInt16
        switch reason {
        case .clientClosed, .socketError, .webSocketFailed, .webSocketClosed: return
        case .serverStopping: code = 1001
        case .outputLimitExceeded, .totalOutputLimitExceeded, .totalInputLimitExceeded, .noRequestBeforeTimeout,
             .notLoggedInBeforeTimeout, .authenticationFailures, .userRemoved, .rejected, .outOfDescriptors:
            code = 1008
        default: code = 1011
        }
        webSocketOutputEnded = true
        guard !writeInFlight else { return }
        var frame: [UInt8] = [0x88, 2, UInt8(code >> 8), UInt8(code & 0xFF)]
        frame.withUnsafeMutableBytes { raw in
            var buffer = uv_buf_t(base: raw.baseAddress!.assumingMemoryBound(to: CChar.self), len: raw.count)
            _ = uv_try_write(asStream(handle), &buffer, 1)
        }
    }

    /// On closing a TLS connection: queues our close_notify (unless the peer left or the socket failed),
    /// then offers what ciphertext is queued (that alert, or the alert of a failed handshake) to the socket
    /// once, without waiting: the socket is closed right after, and the peer's close_notify is not awaited.
    private func sendFinalTLSRecords(_ tls: TLSSession, reason: CloseReason) {
        switch reason {
        case .clientClosed, .socketError: break
        default: tls.queueCloseNotify()
        }
        if !writeInFlight, !tls.ciphertext.isEmpty {
            let buffers = chunkPool.gatherBuffers(capacity: tls.ciphertext.chunkCount)
            let count = tls.ciphertext.gather(into: buffers, capacity: tls.ciphertext.chunkCount)
            _ = uv_try_write(asStream(handle), buffers, UInt32(count))
        }
        tls.ciphertext.removeAll(returningTo: chunkPool)
        queuedCiphertextBytes = 0
    }

    // MARK: - Input

    private func received(_ bytes: UnsafeBufferPointer<UInt8>) {
        if let tls {
            receivedCiphertext(bytes, tls: tls)
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

    /// Decrypts and frames what a TLS client sent. Any ciphertext the calls produced (handshake flight,
    /// session tickets, a KeyUpdate answer, an alert), and plaintext an earlier `SSL_write` could not
    /// encrypt before the handshake, are written at this iteration's flush.
    private func receivedCiphertext(_ bytes: UnsafeBufferPointer<UInt8>, tls: TLSSession) {
        let wasHandshaking = !tls.isHandshakeComplete
        let outcome = tls.receive(bytes, scratch: eventLoop.tlsPlaintextBuffer) { plaintext in
            if wasHandshaking, !announcedHandshake {
                // Before the first request of a client that sent it with its handshake's last flight.
                announcedHandshake = true
                delegate.connectionDidCompleteTLSHandshake(self)
            }
            // Paused by a line of an earlier record: the rest is held (decrypting goes on, so the
            // records of this read are all taken from OpenSSL; no more is read until resumed).
            frame(plaintext)
            return !isClosing && closeAfterFlush == nil
        }
        guard !isClosing else { return }
        if wasHandshaking, tls.isHandshakeComplete, !announcedHandshake {
            announcedHandshake = true
            delegate.connectionDidCompleteTLSHandshake(self)
            guard !isClosing else { return }
        }
        noteCiphertext()
        switch outcome {
        case .proceed: break
        case .peerClosed:
            close(reason: .clientClosed)
            return
        case let .failed(reason):
            close(reason: tls.isHandshakeComplete ? .tlsError(reason) : .tlsHandshakeFailed(reason))
            return
        }
        if queuedCiphertextBytes > 0 || (!pending.isEmpty && tls.isHandshakeComplete) { scheduleFlush() }
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

    /// Hands what `bytes` hold (lines, HTTP requests or WebSocket messages) to the delegate until the
    /// connection closes or pauses; returns how many bytes were consumed.
    private func feedInput(_ bytes: UnsafeBufferPointer<UInt8>) -> Int {
        if let webSocket { return feedWebSocket(bytes, webSocket) }
        if httpParser != nil { return feedHTTP(bytes) }
        return feedLines(bytes)
    }

    /// Parses HTTP requests and hands each to the delegate; after an upgrade the rest goes to the
    /// WebSocket session.
    private func feedHTTP(_ bytes: UnsafeBufferPointer<UInt8>) -> Int {
        var offset = 0
        while offset < bytes.count, let parser = httpParser, !isClosing, closeAfterFlush == nil, pausedReasons.isEmpty {
            switch parser.feed(UnsafeBufferPointer(rebasing: bytes[offset...])) {
            case .needMore:
                return bytes.count
            case let .failed(status, reason):
                delegate.connection(self, didRefuseHTTPRequest: status, reason: reason)
                return bytes.count
            case let .request(head, consumed):
                offset += consumed
                delegate.connection(self, didReceiveHTTPRequest: head)
                if let webSocket { return offset + feedWebSocket(UnsafeBufferPointer(rebasing: bytes[offset...]), webSocket) }
            }
        }
        return offset
    }

    /// Hands messages held from before a pause, then offers `bytes` to the WebSocket session; writes the
    /// control frames it answered with and closes once it has sent a close frame.
    private func feedWebSocket(_ bytes: UnsafeBufferPointer<UInt8>, _ session: WebSocketSession) -> Int {
        if session.hasHeldMessages, !session.deliverHeldMessages() { return 0 }
        guard !isClosing, closeAfterFlush == nil, pausedReasons.isEmpty else { return 0 }
        let received = session.receive(bytes)
        guard !isClosing else { return bytes.count }
        guard let taken = received else {
            // A frame wslay rejects outright (a control frame over 125 bytes or fragmented, ...): it stops
            // reading and would send a close without a status; the RFC's answer is 1002.
            endWebSocket(code: 1002)
            return bytes.count
        }
        if !session.flush() {
            close(reason: .webSocketFailed)
            return bytes.count
        }
        if session.closeSent, closeAfterFlush == nil {
            webSocketOutputEnded = true
            closeAfterFlush = .webSocketClosed(code: session.statusCodeSent)
            scheduleFlush()
            return bytes.count
        }
        return taken
    }

    /// Queues a close frame with `code` (bypassing wslay's queue) and closes once it is written.
    private func endWebSocket(code: UInt16) {
        guard !webSocketOutputEnded else { return }
        pending.append([0x88, 2, UInt8(code >> 8), UInt8(code & 0xFF)], pool: chunkPool)
        webSocketOutputEnded = true
        closeAfterFlush = .webSocketClosed(code: code)
        didEnqueue()
    }

    // MARK: - WebSocketSessionOwner

    func webSocketSessionDidReceive(_ message: UnsafeBufferPointer<UInt8>) -> Bool {
        guard !isClosing, closeAfterFlush == nil else { return false }
        delegate.connection(self, didReceiveLine: message)
        return !isClosing && closeAfterFlush == nil && pausedReasons.isEmpty
    }

    func webSocketSessionWrite(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard !isClosing else { return }
        pending.append(UnsafeRawBufferPointer(bytes), pool: chunkPool)
        didEnqueue()
    }

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
        let buffered = framer.bufferedCount + heldInput.count - heldStart + (httpParser?.bufferedCount ?? 0)
            + (webSocket?.heldBytes ?? 0)
        guard !isClosing, buffered != accountedInputBytes else { return }
        eventLoop.bufferedInputBytes += buffered - accountedInputBytes
        accountedInputBytes = buffered
        if eventLoop.bufferedInputBytes > maximumTotalInputBytes { delegate.connectionsPassedTotalInputLimit(self) }
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
