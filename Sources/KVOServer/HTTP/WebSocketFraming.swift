import KVOEngine
import KVOModel

/// WebSocket (RFC 6455) as a connection's framing (`MessageFraming`), after an HTTP upgrade: a
/// `WebSocketSession` (wslay) turns frames into messages, each handed to the delegate exactly as a line
/// would be, and everything queued for the connection (replies, events, notices) leaves as one text frame
/// per message: the frame header goes in front of the same bytes a JSON-lines client gets, less their
/// newline. Owned by one connection (reached unowned); loop thread only.
final class WebSocketFraming: MessageFraming, WebSocketSessionOwner {
    private unowned let connection: Connection
    private var session: WebSocketSession!
    /// Set once a close frame is queued or sent: no data frame may follow it.
    private var outputEnded = false

    /// With `maximumMessageBytes` (the request size limit). Nil when wslay cannot allocate its context.
    init?(connection: Connection, maximumMessageBytes: Int) {
        self.connection = connection
        guard let session = WebSocketSession(owner: self, maximumMessageBytes: maximumMessageBytes) else { return nil }
        self.session = session
    }

    var metricsTransport: ConnectionKind { .webSocket }
    var bufferedCount: Int { session.heldBytes }
    var hasHeldInput: Bool { session.hasHeldMessages }

    /// Hands messages held from before a pause, then offers `bytes` to the session; writes the control
    /// frames it answered with and closes once it has sent a close frame.
    func feed(_ bytes: UnsafeBufferPointer<UInt8>, on connection: Connection) -> Int {
        if session.hasHeldMessages, !session.deliverHeldMessages() { return 0 }
        guard connection.acceptsInput else { return 0 }
        let received = session.receive(bytes)
        guard !connection.isClosing else { return bytes.count }
        guard let taken = received else {
            // A frame wslay rejects outright (a control frame over 125 bytes or fragmented, ...): it stops
            // reading and would send a close without a status; the RFC's answer is 1002.
            end(code: 1002)
            return bytes.count
        }
        if !session.flush() {
            connection.close(reason: .webSocketFailed)
            return bytes.count
        }
        if session.closeSent, connection.closeAfterFlush == nil {
            outputEnded = true
            connection.closeAfterFlush = .webSocketClosed(code: session.statusCodeSent)
            connection.scheduleFlush()
            return bytes.count
        }
        return taken
    }

    /// Queues a close frame with `code` (bypassing wslay's queue) and closes once it is written.
    private func end(code: UInt16) {
        guard !outputEnded else { return }
        outputEnded = true
        connection.closeAfterFlush = .webSocketClosed(code: code)
        let frame: [UInt8] = [0x88, 2, UInt8(code >> 8), UInt8(code & 0xFF)]
        frame.withUnsafeBytes { connection.enqueueRaw($0) }
    }

    func enqueueMessage(_ bytes: UnsafeRawBufferPointer, into output: inout ChunkedOutputBuffer, pool: OutputChunkPool) -> Bool {
        guard !outputEnded else { return false }
        let payload = bytes.last == 0x0A ? bytes.count - 1 : bytes.count
        output.appendWebSocketTextFrameHeader(payloadLength: payload, pool: pool)
        output.append(UnsafeRawBufferPointer(rebasing: bytes[0..<payload]), pool: pool)
        return true
    }

    func enqueueEvent(head: (UInt64, UInt64, UInt64), headLength: Int, subscription: SubscriptionID,
                      tail: UnsafeRawBufferPointer, into output: inout ChunkedOutputBuffer, pool: OutputChunkPool) -> Bool {
        guard !outputEnded else { return false }
        // The tail ends with the newline a JSON-lines client needs and a frame does not.
        let payload = headLength + ChunkedOutputBuffer.decimalLength(subscription) + tail.count - 1
        output.appendWebSocketTextFrameHeader(payloadLength: payload, pool: pool)
        output.appendEventHead(head, headLength: headLength, subscription: subscription, pool: pool)
        output.append(UnsafeRawBufferPointer(rebasing: tail[0..<(tail.count - 1)]), pool: pool)
        return true
    }

    /// A close frame, code 1008, after the last message.
    func willClose(after reason: CloseReason) -> CloseReason? {
        guard !outputEnded else { return nil }
        session.queueClose(code: 1008, reason: "\(reason)")
        outputEnded = true
        return session.flush() ? nil : .webSocketFailed
    }

    /// On closing for a reason of the server's: a close frame (1001 when the server stops, 1008 for a
    /// broken limit, 1011 otherwise), offered once.
    func lastBytes(closing reason: CloseReason) -> [UInt8]? {
        guard !outputEnded else { return nil }
        let code: UInt16
        switch reason {
        case .clientClosed, .socketError, .webSocketFailed, .webSocketClosed: return nil
        case .serverStopping, .clusterStateReplaced, .storageRolledBack: code = 1001
        case .outputLimitExceeded, .totalOutputLimitExceeded, .totalInputLimitExceeded, .noRequestBeforeTimeout,
             .idleTimeout, .notLoggedInBeforeTimeout, .authenticationFailures, .userRemoved, .rejected, .outOfDescriptors, .killed:
            code = 1008
        default: code = 1011
        }
        outputEnded = true
        return [0x88, 2, UInt8(code >> 8), UInt8(code & 0xFF)]
    }

    /// A ping frame with no payload (FIN, opcode 9; a server's frames are not masked): the client's pong, like
    /// any bytes it sends, counts as a sign of life (docs/protocol.md, "Idle connections and heartbeats").
    var heartbeat: [UInt8]? { outputEnded ? nil : [0x89, 0x00] }

    var isOneWay: Bool { false }
    func willFlush(into output: inout ChunkedOutputBuffer, pool: OutputChunkPool) {}

    // MARK: - WebSocketSessionOwner

    func webSocketSessionDidReceive(_ message: UnsafeBufferPointer<UInt8>) -> Bool {
        guard !connection.isClosing, connection.closeAfterFlush == nil else { return false }
        connection.delegate.connection(connection, didReceiveLine: message)
        return connection.acceptsInput
    }

    func webSocketSessionWrite(_ bytes: UnsafeBufferPointer<UInt8>) {
        connection.enqueueRaw(UnsafeRawBufferPointer(bytes))
    }
}
