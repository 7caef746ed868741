import CLibUV
#if canImport(Glibc)
import Glibc
#endif

/// The listening socket. Accepted sockets go to `onConnection`, which must `uv_accept` them.
///
/// The `uv_tcp_t` lives from `init` to its close callback, which releases this object.
/// Loop thread only.
final class TCPListener {
    let handle: UnsafeMutablePointer<uv_tcp_t>
    /// The address actually bound (with the real port when 0 was asked).
    private(set) var boundAddress = sockaddr_storage()
    private let onConnection: (TCPListener, Int32) -> Void
    private var isClosed = false

    /// Binds and listens on host:port (port 0 picks a free one).
    init(loop: EventLoop, host: String, port: Int, backlog: Int32 = 511,
         onConnection: @escaping (TCPListener, Int32) -> Void) throws(TransportError) {
        self.onConnection = onConnection
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

    var port: Int { SocketAddress.port(boundAddress) }
    var addressDescription: String { SocketAddress.describe(boundAddress) }
    /// Whether the listener is bound to a loopback address only.
    var isLoopback: Bool { SocketAddress.isLoopback(boundAddress) }

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
