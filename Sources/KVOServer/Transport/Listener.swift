import CLibUV
#if canImport(Glibc)
import Glibc
import KVOEngine
import KVOModel
#endif

/// A listening socket of any kind (TCP: `TCPListener`; Unix-domain: `UnixListener`), and what its
/// connections speak (`stack`). The server accepts from every listener the same way: it asks the listener
/// for a socket handle, `uv_accept`s into it, and builds the connection's stages from `stack`; it never
/// asks which listener it is. A new listener kind is one file conforming to this, plus its wiring in
/// `Server.init` (docs/design.md, "Transports"). Loop thread only.
protocol Listener: AnyObject {
    /// Which setting made this listener (for the server's address accessors and logs).
    var role: ListenerRole { get }
    /// What its connections speak.
    var stack: TransportStack { get }
    /// The listening handle, as a stream.
    var stream: UnsafeMutablePointer<uv_stream_t> { get }
    /// The kind of socket its connections have.
    var socketKind: SocketKind { get }
    /// "127.0.0.1:7420", "unix:/run/kvod.sock".
    var addressDescription: String { get }
    /// Whether only this machine can connect (a loopback address, a Unix socket): then serving with no
    /// users defined is allowed without `--insecure-open`.
    var isLoopback: Bool { get }
    /// A new, initialized (not yet accepted) socket handle on `loop` for the next connection.
    func makeConnectionSocket(loop: UnsafeMutablePointer<uv_loop_t>) -> UnsafeMutablePointer<uv_stream_t>
    /// Stops accepting (and cleans up after itself: a Unix listener removes its socket file). Idempotent.
    func close()
}

/// Which setting made a listener.
enum ListenerRole: Equatable {
    /// `--port`: JSON lines.
    case plain
    /// `--tls-port`: JSON lines over TLS.
    case tls
    /// `--http-port`: HTTP and WebSocket (with `--http-tls`, over TLS).
    case http
    /// `--unix`: JSON lines on a Unix-domain socket.
    case unix
}

/// The kind of socket a connection has: what starting it involves, and how its peer is named.
enum SocketKind {
    case tcp
    /// A Unix-domain socket (the listener's path, for logs).
    case unix(path: String)

    /// The `transport` metrics label of JSON lines on this socket.
    var metricsTransport: ConnectionKind {
        switch self {
        case .tcp: .tcp
        case .unix: .unix
        }
    }

    /// Prepares an accepted socket (TCP: no Nagle) and returns its peer's name, for logs.
    func prepare(_ stream: UnsafeMutablePointer<uv_stream_t>) -> String {
        switch self {
        case let .unix(path):
            return "unix:" + path
        case .tcp:
            let handle = UnsafeMutableRawPointer(stream).assumingMemoryBound(to: uv_tcp_t.self)
            uv_tcp_nodelay(handle, 1)
            var storage = sockaddr_storage()
            var length = Int32(MemoryLayout<sockaddr_storage>.size)
            let status = withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { uv_tcp_getpeername(handle, $0, &length) }
            }
            return status == 0 ? SocketAddress.describe(storage) : "?"
        }
    }
}
