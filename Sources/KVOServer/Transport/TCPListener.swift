import CLibUV
#if canImport(Glibc)
import Glibc
import KVOEngine
import KVOModel
#endif

/// A listening TCP socket (`--port`, `--tls-port`, `--http-port`). Accepted sockets go to
/// `onConnection`, which must `uv_accept` them.
///
/// The `uv_tcp_t` lives from `init` to its close callback, which releases this object.
/// Loop thread only.
final class TCPListener: Listener {
    let handle: UnsafeMutablePointer<uv_tcp_t>
    let role: ListenerRole
    let stack: TransportStack
    /// The address actually bound (with the real port when 0 was asked).
    private(set) var boundAddress = sockaddr_storage()
    private let onConnection: (Listener, Int32) -> Void
    private var isClosed = false

    /// Binds and listens on host:port (port 0 picks a free one); its connections speak `stack`.
    init(loop: EventLoop, host: String, port: Int, role: ListenerRole, stack: TransportStack, backlog: Int32 = 511,
         onConnection: @escaping (Listener, Int32) -> Void) throws(TransportError) {
        self.onConnection = onConnection
        self.role = role
        self.stack = stack
        handle = allocateHandle(uv_tcp_t.self, kind: UV_TCP)
        uv_tcp_init(loop.raw, handle)
        retainOwner(self, in: handle)
        do throws(TransportError) {
            var address = try SocketAddress.resolve(host: host, port: port)
            var status = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { uv_tcp_bind(handle, $0, 0) }
            }
            guard status == 0 else { throw TransportError(operation: "bind \(host):\(port)", status: status) }
            status = uv_listen(asStream(handle), backlog, TCPListener.connectionCallback)
            guard status == 0 else { throw TransportError(operation: "listen on \(host):\(port)", status: status) }
            var length = Int32(MemoryLayout<sockaddr_storage>.size)
            _ = withUnsafeMutablePointer(to: &boundAddress) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { uv_tcp_getsockname(handle, $0, &length) }
            }
        } catch {
            close()
            throw error
        }
    }

    var stream: UnsafeMutablePointer<uv_stream_t> { asStream(handle) }
    var socketKind: SocketKind { .tcp }
    var port: Int { SocketAddress.port(boundAddress) }
    var addressDescription: String { SocketAddress.describe(boundAddress) }
    /// Whether the listener is bound to a loopback address only.
    var isLoopback: Bool { SocketAddress.isLoopback(boundAddress) }

    func makeConnectionSocket(loop: UnsafeMutablePointer<uv_loop_t>) -> UnsafeMutablePointer<uv_stream_t> {
        let socket = allocateHandle(uv_tcp_t.self, kind: UV_TCP)
        uv_tcp_init(loop, socket)
        return asStream(socket)
    }

    /// Stops accepting. Idempotent.
    func close() {
        guard !isClosed else { return }
        isClosed = true
        closeHandle(handle)
    }

    private static let connectionCallback: uv_connection_cb = { stream, status in
        let listener = owner(of: UnsafeMutableRawPointer(stream!).assumingMemoryBound(to: uv_handle_t.self),
                             as: TCPListener.self)
        listener.onConnection(listener, status)
    }
}
