import KVOEngine
import KVOModel

/// HTTP/1.1 as a connection's framing (`MessageFraming`, the HTTP listener's connections): each request
/// parsed by `HTTPRequestParser` goes to the delegate (`didReceiveHTTPRequest`), which answers it
/// (`Connection.sendHTTPResponse`) or upgrades the connection (`Connection.upgradeToWebSocket`); the
/// upgrade replaces this framing with a `WebSocketFraming`, which gets the bytes after the request.
/// Owned by one connection; loop thread only.
final class HTTPFraming: MessageFraming {
    private let parser: HTTPRequestParser
    /// The HTTP API requests (`/v1/…`) whose replies are awaited, oldest first: each reply queued becomes the
    /// response of the first (`HTTPAPIExchange`); replies come in request order.
    private var exchanges: [HTTPAPIExchange] = []
    /// The connection this framing belongs to, for closing after a response without keep-alive.
    private weak var connection: Connection?

    init(limits: HTTPRequestParser.Limits) {
        parser = HTTPRequestParser(limits: limits)
    }

    var metricsTransport: ConnectionKind { .http }
    var bufferedCount: Int { parser.bufferedCount }
    var hasHeldInput: Bool { false }

    func feed(_ bytes: UnsafeBufferPointer<UInt8>, on connection: Connection) -> Int {
        var offset = 0
        while offset < bytes.count, connection.framing === self, connection.acceptsInput {
            switch parser.feed(UnsafeBufferPointer(rebasing: bytes[offset...])) {
            case .needMore:
                return bytes.count
            case let .failed(status, reason):
                if parser.refusedAPIRequest {
                    // The HTTP API answers with problem details, as its other refusals (`HTTPAPIProblem`).
                    let code = status == .contentTooLarge || status == .uriTooLong || status == .headersTooLarge ? "too_large" : "bad_request"
                    connection.sendHTTPResponse(HTTPAPIProblem(status: status, code: code, detail: reason).response(keepAlive: false),
                                                keepAlive: false, reason: .httpRefused(status: status.rawValue, reason: reason))
                } else {
                    connection.delegate.connection(connection, didRefuseHTTPRequest: status, reason: reason)
                }
                return bytes.count
            case let .request(head, consumed):
                offset += consumed
                connection.delegate.connection(connection, didReceiveHTTPRequest: head)
                if let upgraded = connection.framing, upgraded !== self {
                    return offset + upgraded.feed(UnsafeBufferPointer(rebasing: bytes[offset...]), on: connection)
                }
            }
        }
        return offset
    }

    /// The next reply queued answers `exchange` (an HTTP API request translated into a line, about to be handled).
    func expectReply(_ exchange: HTTPAPIExchange, on connection: Connection) {
        exchanges.append(exchange)
        self.connection = connection
    }

    // A reply to an HTTP API request becomes its response; nothing else but HTTP responses goes to an HTTP
    // connection (were a message queued without an exchange waiting, it would go as it is).
    func enqueueMessage(_ bytes: UnsafeRawBufferPointer, into output: inout ChunkedOutputBuffer, pool: OutputChunkPool) -> Bool {
        guard !exchanges.isEmpty else {
            output.append(bytes, pool: pool)
            return true
        }
        let exchange = exchanges.removeFirst()
        exchange.response(to: bytes).withUnsafeBytes { output.append($0, pool: pool) }
        if !exchange.keepAlive, let connection, connection.closeAfterFlush == nil { connection.closeAfterFlush = .httpResponseComplete }
        return true
    }

    func enqueueEvent(head: (UInt64, UInt64, UInt64), headLength: Int, subscription: SubscriptionID,
                      tail: UnsafeRawBufferPointer, into output: inout ChunkedOutputBuffer, pool: OutputChunkPool) -> Bool {
        output.appendEventHead(head, headLength: headLength, subscription: subscription, pool: pool)
        output.append(tail, pool: pool)
        return true
    }

    func willClose(after reason: CloseReason) -> CloseReason? { nil }
    func lastBytes(closing reason: CloseReason) -> [UInt8]? { nil }
    var heartbeat: [UInt8]? { nil }
}

extension Connection {
    /// Whether this connection came through the HTTP listener (upgraded to WebSocket or not).
    var isHTTP: Bool { framing is HTTPFraming || framing is WebSocketFraming }

    /// Queues an HTTP response (raw bytes, on a connection not upgraded); without `keepAlive` the
    /// connection closes once it is written, for `reason` (default: the response said `Connection: close`).
    func sendHTTPResponse(_ bytes: [UInt8], keepAlive: Bool, reason: CloseReason = .httpResponseComplete) {
        guard !isClosing, !(framing is WebSocketFraming) else { return }
        bytes.withUnsafeBytes { enqueueRaw($0) }
        if !keepAlive { closeAfterFlush = reason }
    }

    /// Answers a WebSocket upgrade with 101 and switches the connection to WebSocket framing: from now on
    /// the delegate gets messages as lines, and everything queued leaves as text frames. Returns false
    /// (the connection closes) when wslay cannot allocate its context.
    func upgradeToWebSocket(accept: String) -> Bool {
        guard !isClosing, framing is HTTPFraming else { return false }
        sendHTTPResponse(HTTPResponse.switchingToWebSocket(accept: accept), keepAlive: true)
        guard let webSocket = WebSocketFraming(connection: self, maximumMessageBytes: maximumLineLength) else {
            close(reason: .webSocketFailed)
            return false
        }
        replaceFraming(with: webSocket)
        return true
    }
}
