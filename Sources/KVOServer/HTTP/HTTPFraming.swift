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
    /// Whether the connection carries an event stream (Server-Sent Events, after an observing request's response):
    /// events go out as SSE events, anything more the client sends is dropped.
    private(set) var isStreaming = false
    /// The revision of the last SSE event queued, whose block is not ended yet: the next event ends it without an
    /// `id` when it has the same revision, with `id: <rev>` otherwise, and so does the flush (`willFlush`). So `id`
    /// marks the last event of each revision only, and a client resuming from it (`Last-Event-ID`) misses nothing
    /// of a revision whose events it got only part of.
    private var openBlockRevision: Int64?

    init(limits: HTTPRequestParser.Limits) {
        parser = HTTPRequestParser(limits: limits)
    }

    var metricsTransport: ConnectionKind { .http }
    var bufferedCount: Int { parser.bufferedCount }
    var hasHeldInput: Bool { false }

    func feed(_ bytes: UnsafeBufferPointer<UInt8>, on connection: Connection) -> Int {
        // An event stream's client has nothing more to say; what it sends anyway (it counted as a sign of life) is dropped.
        if isStreaming { return bytes.count }
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

    /// Whether this connection has carried an HTTP API request: each of those set the connection's principal from its
    /// own token, so such a connection is not upgraded to WebSocket (which would inherit the last one).
    var hasServedAPIRequests = false

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
        let (response, startsStream) = exchange.response(to: bytes)
        response.withUnsafeBytes { output.append($0, pool: pool) }
        if startsStream {
            isStreaming = true
            exchanges.removeAll()
        } else if !exchange.keepAlive, let connection, connection.closeAfterFlush == nil {
            connection.closeAfterFlush = .httpResponseComplete
        }
        return true
    }

    /// An event stream's event: `event: change`, `data:` the event as on TCP (full form), and the block ended
    /// (with `id` when the revision changes: `openBlockRevision`).
    private func enqueueStreamEvent(head: (UInt64, UInt64, UInt64), headLength: Int, subscription: SubscriptionID,
                                    tail: UnsafeRawBufferPointer, into output: inout ChunkedOutputBuffer, pool: OutputChunkPool) {
        let revision = HTTPFraming.revision(inEventTail: tail)
        if let open = openBlockRevision { endBlock(revision: open == revision ? nil : open, into: &output, pool: pool) }
        HTTPFraming.eventPrefix.withUnsafeBytes { output.append($0, pool: pool) }
        output.appendEventHead(head, headLength: headLength, subscription: subscription, pool: pool)
        // The tail ends with the newline that also ends the data line.
        output.append(tail, pool: pool)
        openBlockRevision = revision ?? -1
    }

    private func endBlock(revision: Int64?, into output: inout ChunkedOutputBuffer, pool: OutputChunkPool) {
        var bytes: [UInt8] = []
        if let revision, revision >= 0 {
            bytes += Array("id: ".utf8)
            bytes += Array(String(revision).utf8)
            bytes.append(0x0A)
        }
        bytes.append(0x0A)
        bytes.withUnsafeBytes { output.append($0, pool: pool) }
        openBlockRevision = nil
    }

    func willFlush(into output: inout ChunkedOutputBuffer, pool: OutputChunkPool) {
        if let open = openBlockRevision { endBlock(revision: open, into: &output, pool: pool) }
    }

    var isOneWay: Bool { isStreaming }

    private static let eventPrefix: [UInt8] = Array("event: change\ndata: ".utf8)

    /// The event's `rev` (the first `"rev":` member in its tail: the event's own, written before `change`, whose
    /// values may hold other `rev` keys; no string can hold the bytes, its quotes being escaped).
    static func revision(inEventTail tail: UnsafeRawBufferPointer) -> Int64? {
        let key: [UInt8] = Array(#","rev":"#.utf8)
        guard tail.count > key.count else { return nil }
        var index = 0
        while index + key.count < tail.count {
            if tail[index] == key[0], (0..<key.count).allSatisfy({ tail[index + $0] == key[$0] }) {
                var value: Int64 = 0
                var position = index + key.count
                var digits = 0
                while position < tail.count, tail[position] >= 0x30, tail[position] <= 0x39, digits < 18 {
                    value = value * 10 + Int64(tail[position] - 0x30)
                    position += 1
                    digits += 1
                }
                return digits > 0 ? value : nil
            }
            index += 1
        }
        return nil
    }

    func enqueueEvent(head: (UInt64, UInt64, UInt64), headLength: Int, subscription: SubscriptionID,
                      tail: UnsafeRawBufferPointer, into output: inout ChunkedOutputBuffer, pool: OutputChunkPool) -> Bool {
        if isStreaming {
            enqueueStreamEvent(head: head, headLength: headLength, subscription: subscription, tail: tail, into: &output, pool: pool)
            return true
        }
        output.appendEventHead(head, headLength: headLength, subscription: subscription, pool: pool)
        output.append(tail, pool: pool)
        return true
    }

    func willClose(after reason: CloseReason) -> CloseReason? { nil }
    func lastBytes(closing reason: CloseReason) -> [UInt8]? { nil }
    /// An event stream's heartbeat is a comment line (`: keepalive`, one newline: it may fall inside an open event
    /// block, where a comment is ignored); plain HTTP has none (its keep-alive has `--first-request-timeout`).
    var heartbeat: [UInt8]? { isStreaming ? HTTPFraming.keepaliveComment : nil }

    private static let keepaliveComment: [UInt8] = Array(": keepalive\n".utf8)
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
