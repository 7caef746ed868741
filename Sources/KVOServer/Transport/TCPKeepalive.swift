import CLibUV
#if canImport(Glibc)
import Glibc
#endif

/// TCP's own liveness checks on an accepted TCP connection (TCP, TLS, HTTP and WebSocket; not a Unix socket),
/// derived from the idle timeout (docs/protocol.md, "Idle connections and heartbeats"), so that the kernel gives
/// up on a dead peer in the same time the server does:
/// - keepalive (`uv_tcp_keepalive`, then `TCP_KEEPINTVL` and `TCP_KEEPCNT`): on a connection with nothing in
///   flight, a probe after half the timeout, then one every sixth, three in all: no answer, and the kernel
///   resets it after about the timeout;
/// - `TCP_USER_TIMEOUT`: data sent (a reply, an event, a heartbeat) unacknowledged for the timeout, or a zero
///   window that long, makes the kernel reset the connection (the read then fails with ETIMEDOUT), where Linux
///   would otherwise retransmit for about 15 minutes.
/// With the idle timeout off (0) the same checks use 120 s: TCP still notices a dead peer, in minutes.
/// Set once per accepted socket (four `setsockopt` calls), never on a read or a write. A value; loop thread.
struct TCPKeepalive: Equatable {
    /// Seconds without traffic before the first probe; between probes; probes unanswered before a reset.
    let idleSeconds: Int32
    let intervalSeconds: Int32
    let probeCount: Int32
    /// `TCP_USER_TIMEOUT`, in milliseconds.
    let userTimeoutMilliseconds: UInt32

    /// The timeout TCP's checks follow when `--idle-timeout` is 0.
    static let timeoutWhenIdleTimeoutIsOff: Double = 120

    /// The checks for an idle timeout of `seconds` (0: off).
    init(idleTimeout seconds: Double) {
        let timeout = seconds > 0 ? seconds : TCPKeepalive.timeoutWhenIdleTimeoutIsOff
        idleSeconds = Int32(max(1, min(timeout / 2, 32_767)).rounded(.down))
        intervalSeconds = Int32(max(1, min(timeout / 6, 32_767)).rounded(.down))
        probeCount = 3
        userTimeoutMilliseconds = UInt32(max(1000, min(timeout * 1000, Double(Int32.max))))
    }

    /// Applies the checks to an accepted TCP socket. A failure changes nothing else: the server's own idle
    /// timeout still holds, so it is not an error worth closing for.
    func apply(to handle: UnsafeMutablePointer<uv_tcp_t>) {
        uv_tcp_keepalive(handle, 1, UInt32(idleSeconds))
        var descriptor: uv_os_fd_t = -1
        guard uv_fileno(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self), &descriptor) == 0 else { return }
        var interval = intervalSeconds
        var count = probeCount
        var userTimeout = userTimeoutMilliseconds
        let size = socklen_t(MemoryLayout<Int32>.size)
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_KEEPINTVL, &interval, size)
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_KEEPCNT, &count, size)
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_USER_TIMEOUT, &userTimeout, socklen_t(MemoryLayout<UInt32>.size))
    }
}
