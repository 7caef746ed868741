import KVOEngine
import KVOModel

/// The seam between a `Connection` and what it speaks (docs/design.md, "Transports").
///
/// A connection is a socket and its output buffers, plus at most two stages on top, socket side first:
/// - a `ConnectionTransform`: a byte transform between the socket and the framing (TLS: `TLSSession`);
/// - a `MessageFraming`: a framing that replaces JSON lines (HTTP: `HTTPFraming`; after an upgrade,
///   WebSocket: `WebSocketFraming`).
/// A plain connection has neither: its `LineFramer` and output buffer are called directly, so the plain
/// path (a read split into lines, an event queued) makes no dynamic call; the stages cost one nil check.
/// Which stages a listener's connections get is its `TransportStack`; the server builds them at accept.

/// What a listener's connections speak: the stages the server puts on each one it accepts.
struct TransportStack: Equatable {
    /// The byte transform, if any.
    enum Transform: Equatable {
        /// TLS with the server's current context (`--tls-port`, `--http-tls`).
        case tls
    }

    /// How requests are framed.
    enum Framing: Equatable {
        /// One JSON request per line (`LineFramer`).
        case lines
        /// HTTP/1.1 requests (`HTTPFraming`), upgradable to WebSocket.
        case http
    }

    var transform: Transform?
    var framing: Framing

    /// JSON lines, in the clear (`--port`, `--unix`).
    static let lines = TransportStack(transform: nil, framing: .lines)
    /// JSON lines over TLS (`--tls-port`).
    static let tlsLines = TransportStack(transform: .tls, framing: .lines)
    /// HTTP and WebSocket, with or without TLS (`--http-port`, `--http-tls`).
    static func http(tls: Bool) -> TransportStack { TransportStack(transform: tls ? .tls : nil, framing: .http) }
}

/// What a `ConnectionTransform` call did, beyond delivering bytes.
enum TransformOutcome {
    /// Carry on (the call may also be waiting for more input).
    case proceed
    /// The peer ended the transform's session (TLS close_notify).
    case peerClosed
    /// The transform failed: close for this reason (after offering the output it queued, e.g. an alert).
    case failed(CloseReason)
}

/// A byte transform between a connection's socket and its framing: what is read becomes what the framing
/// reads, and what the connection queues becomes what goes to the socket. Called once per read and once
/// per flush, never per line or per event. Owned by one connection; loop thread only.
protocol ConnectionTransform: AnyObject {
    /// The `transport` metrics label of connections with this transform (and lines).
    var metricsTransport: ConnectionKind { get }
    /// Whether the transform is set up (TLS: the handshake is complete). Until then queued output waits,
    /// and the server may close the connection after a deadline (`--tls-handshake-timeout`).
    var isEstablished: Bool { get }
    /// The peer's verified identity, once established (TLS: the client certificate's CN), else nil.
    var verifiedPeerName: String? { get }
    /// Bytes the transform made and the socket has not taken yet (counted against the output limit).
    var outputCount: Int { get }
    /// Runs `body` on the bytes ready for the socket; it writes and consumes what it can.
    func withOutput<Result>(_ body: (inout ChunkedOutputBuffer) -> Result) -> Result
    /// Turns bytes read from the socket into input for the framing, handed to `deliver` (valid during the
    /// call; return false to stop delivering). May queue output (a handshake flight, an alert).
    func receive(_ bytes: UnsafeBufferPointer<UInt8>, loop: EventLoop,
                 deliver: (UnsafeBufferPointer<UInt8>) -> Bool) -> TransformOutcome
    /// Turns the connection's queued output into socket bytes, consuming what it took (what it cannot
    /// take yet, before the handshake, stays).
    func send(_ output: inout ChunkedOutputBuffer, loop: EventLoop) -> TransformOutcome
    /// The connection is closing for `reason`: queue any last bytes (TLS close_notify). The connection
    /// then offers the output to the socket once and drops what is left.
    func finish(reason: CloseReason)
}

/// A framing that replaces JSON lines on a connection (HTTP requests; WebSocket messages). Lines are the
/// connection's own `LineFramer`, called directly. Owned by one connection; loop thread only.
protocol MessageFraming: AnyObject {
    /// The `transport` metrics label of a connection framed so.
    var metricsTransport: ConnectionKind { get }
    /// Hands what `bytes` hold to the delegate (through `connection`) until the connection closes or pauses;
    /// returns how many bytes were consumed (the rest are held by the connection and offered again).
    func feed(_ bytes: UnsafeBufferPointer<UInt8>, on connection: Connection) -> Int
    /// Bytes held for an unfinished request or messages held over a pause (counted against --max-total-input).
    var bufferedCount: Int { get }
    /// Whether messages read before a pause wait to be handed out.
    var hasHeldInput: Bool { get }
    /// Queues one protocol message (`bytes`, newline included) into `output`; false: nothing was queued
    /// (the framing's output has ended).
    func enqueueMessage(_ bytes: UnsafeRawBufferPointer, into output: inout ChunkedOutputBuffer, pool: OutputChunkPool) -> Bool
    /// Queues one event (as `Connection.enqueueEvent`) into `output`; false: nothing was queued.
    func enqueueEvent(head: (UInt64, UInt64, UInt64), headLength: Int, subscription: SubscriptionID,
                      tail: UnsafeRawBufferPointer, into output: inout ChunkedOutputBuffer, pool: OutputChunkPool) -> Bool
    /// The connection sends its last message and closes for `reason` (`sendAndClose`): queue what the
    /// framing says before closing (a WebSocket close frame). Returns a reason to close at once instead.
    func willClose(after reason: CloseReason) -> CloseReason?
    /// The connection is closing for `reason`, its queued output dropped: bytes to offer the socket once
    /// (a WebSocket close frame), or nil.
    func lastBytes(closing reason: CloseReason) -> [UInt8]?
    /// The server's heartbeat to a quiet connection (`Connection.sendHeartbeat()`), queued as it is: a WebSocket
    /// ping frame; nil when the framing has none (HTTP, whose keep-alive has `--first-request-timeout`) or its
    /// output has ended.
    var heartbeat: [UInt8]? { get }
    /// Whether the peer is not expected to send anything (an HTTP API event stream: Server-Sent Events): the idle
    /// sweep heartbeats it and never closes it for its silence (a vanished peer is found by TCP_USER_TIMEOUT on the
    /// unacknowledged heartbeat).
    var isOneWay: Bool { get }
    /// Output is about to be written (`Connection.flush`): a last chance to queue what ends the iteration's output
    /// (an event stream's last `id:`).
    func willFlush(into output: inout ChunkedOutputBuffer, pool: OutputChunkPool)
}
