import CLibUV
#if canImport(Glibc)
import Glibc
import KVOEngine
import KVOModel
#endif

/// A listening Unix-domain stream socket (`--unix PATH`, a `uv_pipe_t`): JSON lines, reachable only from
/// this machine, by whoever the file's mode lets in (`--unix-mode`, 0600 by default: the server's user).
///
/// At start a socket file already at `path` is replaced only when nothing listens on it (a stale file from
/// a crash); a live one, or a file that is no socket, is refused. The mode is set before `listen`, so no
/// client connects while the file still has the umask's mode. `close()` removes the file (a clean stop), and only
/// while it is still the socket this listener bound (its device and inode): a path deleted and bound again by
/// another kvod belongs to that one (issue 42).
/// The `uv_pipe_t` lives from `init` to its close callback, which releases this object. Loop thread only.
final class UnixListener: Listener {
    let handle: UnsafeMutablePointer<uv_pipe_t>
    let path: String
    let stack = TransportStack.lines
    var role: ListenerRole { .unix }
    private let onConnection: (Listener, Int32) -> Void
    private var isClosed = false
    /// The socket file this listener created at `path` (device and inode), which `close()` removes if it is
    /// still there; nil before the bind, after the close, or when it could not be read back.
    private var boundFile: FileIdentity?

    /// Binds `path` with `mode` (0o600: owner only) and listens.
    init(loop: EventLoop, path: String, mode: mode_t, backlog: Int32 = 511,
         onConnection: @escaping (Listener, Int32) -> Void) throws(TransportError) {
        self.path = path
        self.onConnection = onConnection
        handle = allocateHandle(uv_pipe_t.self, kind: UV_NAMED_PIPE)
        uv_pipe_init(loop.raw, handle, 0)
        retainOwner(self, in: handle)
        do throws(TransportError) {
            let operation = "listen on unix:\(path)"
            // sun_path holds 108 bytes with the terminating NUL; libuv would cut a longer path short.
            guard path.utf8.count < 108 else {
                throw TransportError(operation: operation, status: UV_ENAMETOOLONG.rawValue,
                                     detail: "a Unix socket path has at most 107 bytes")
            }
            try UnixListener.removeStaleSocket(at: path, operation: operation)
            // Bound here, not with `uv_pipe_bind`: libuv would unlink the path when the handle closes, whatever
            // file is there by then (another kvod's socket, bound after this one's was deleted).
            let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard descriptor >= 0 else { throw TransportError(operation: operation, status: -errno) }
            var address = UnixListener.address(path)
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            guard bound == 0 else {
                let error = UnixListener.bindError(errno, path: path, operation: operation)
                Glibc.close(descriptor)
                throw error
            }
            boundFile = FileIdentity(socketAt: path)
            var status = uv_pipe_open(handle, descriptor)
            guard status == 0 else {
                Glibc.close(descriptor)
                throw TransportError(operation: operation, status: status)
            }
            guard chmod(path, mode) == 0 else {
                throw TransportError(operation: operation, status: -errno, detail: "cannot set the socket's mode")
            }
            status = uv_listen(asStream(handle), backlog, UnixListener.connectionCallback)
            guard status == 0 else { throw TransportError(operation: operation, status: status) }
        } catch {
            close()
            throw error
        }
    }

    var stream: UnsafeMutablePointer<uv_stream_t> { asStream(handle) }
    var socketKind: SocketKind { .unix(path: path) }
    var addressDescription: String { "unix:" + path }
    /// A Unix socket is reachable from this machine only.
    var isLoopback: Bool { true }

    func makeConnectionSocket(loop: UnsafeMutablePointer<uv_loop_t>) -> UnsafeMutablePointer<uv_stream_t> {
        let socket = allocateHandle(uv_pipe_t.self, kind: UV_NAMED_PIPE)
        uv_pipe_init(loop, socket, 0)
        return asStream(socket)
    }

    /// Stops accepting and removes the socket file. Idempotent.
    func close() {
        guard !isClosed else { return }
        isClosed = true
        if let boundFile {
            if FileIdentity(socketAt: path) == boundFile { unlink(path) }
            self.boundFile = nil
        }
        closeHandle(handle)
    }

    /// Removes a socket file at `path` that nothing listens on (left by a process that did not stop
    /// cleanly); throws when something does, or when the file is not a socket. Nothing there: nothing to do.
    private static func removeStaleSocket(at path: String, operation: String) throws(TransportError) {
        var status = stat()
        guard lstat(path, &status) == 0 else { return }
        guard status.st_mode & S_IFMT == S_IFSOCK else {
            throw TransportError(operation: operation, status: UV_EEXIST.rawValue,
                                 detail: "'\(path)' exists and is not a socket: kvod does not replace it")
        }
        let probe = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard probe >= 0 else { throw TransportError(operation: operation, status: -errno) }
        defer { Glibc.close(probe) }
        var address = address(path)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(probe, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        if connected == 0 {
            throw TransportError(operation: operation, status: UV_EADDRINUSE.rawValue,
                                 detail: "another process is listening on '\(path)'; stop it first, or choose another --unix path")
        }
        let reason = errno
        guard reason == ECONNREFUSED else {
            throw TransportError(operation: operation, status: -reason, detail: "cannot tell whether '\(path)' is in use")
        }
        guard unlink(path) == 0 || errno == ENOENT else {
            throw TransportError(operation: operation, status: -errno, detail: "cannot remove the stale socket '\(path)'")
        }
    }

    /// The error for a failed `bind` (`errno`): a path whose directory does not exist says so, so the operator
    /// is not sent to look at permissions (libuv's own bind reported it as EACCES, as Windows does).
    private static func bindError(_ reason: Int32, path: String, operation: String) -> TransportError {
        guard reason == ENOENT || reason == ENOTDIR else { return TransportError(operation: operation, status: -reason) }
        let directory: String
        if let slash = path.lastIndex(of: "/") {
            directory = slash == path.startIndex ? "/" : String(path[..<slash])
        } else {
            directory = "."
        }
        return TransportError(operation: operation, status: -reason, detail: "the directory '\(directory)' does not exist")
    }

    /// The socket address of `path` (shorter than `sun_path`: checked in `init`).
    private static func address(_ path: String) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            path.utf8CString.withUnsafeBytes { raw.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0.prefix(raw.count - 1))) }
        }
        return address
    }

    private static let connectionCallback: uv_connection_cb = { stream, status in
        let listener = owner(of: UnsafeMutableRawPointer(stream!).assumingMemoryBound(to: uv_handle_t.self),
                             as: UnixListener.self)
        listener.onConnection(listener, status)
    }
}
