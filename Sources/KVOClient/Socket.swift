#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Blocking socket helpers for the I/O thread: connecting with a timeout and the wake-up pipe.
enum Socket {
    /// Connects to `host:port` (a name or numeric address), trying each address in turn, each within
    /// `timeout` seconds. Returns a blocking, close-on-exec descriptor with TCP_NODELAY.
    static func connect(host: String, port: Int, timeout: Double) throws(KVODError) -> Int32 {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc)
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
        hints.ai_socktype = SOCK_STREAM
        #endif
        var results: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &results)
        guard status == 0, let first = results else {
            throw .cannotConnect(host: host, port: port, reason: String(cString: gai_strerror(status)))
        }
        defer { freeaddrinfo(results) }
        var lastError = "no address"
        var candidate: UnsafeMutablePointer<addrinfo>? = first
        while let info = candidate {
            candidate = info.pointee.ai_next
            let descriptor = socket(info.pointee.ai_family, info.pointee.ai_socktype, info.pointee.ai_protocol)
            guard descriptor >= 0 else {
                lastError = String(cString: strerror(errno))
                continue
            }
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
            #if canImport(Darwin)
            // Darwin has no MSG_NOSIGNAL (`sendFlags`): the socket itself is told not to raise SIGPIPE.
            var noSignal: Int32 = 1
            setsockopt(descriptor, SOL_SOCKET, SO_NOSIGPIPE, &noSignal, socklen_t(MemoryLayout<Int32>.size))
            #endif
            let flags = fcntl(descriptor, F_GETFL)
            _ = fcntl(descriptor, F_SETFL, flags | O_NONBLOCK)
            var connected = Socket.connectDescriptor(descriptor, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0
            if !connected, errno == EINPROGRESS {
                var entry = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
                if poll(&entry, 1, Int32(timeout * 1000)) == 1 {
                    var socketError: Int32 = 0
                    var length = socklen_t(MemoryLayout<Int32>.size)
                    getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &socketError, &length)
                    if socketError == 0 { connected = true } else { lastError = String(cString: strerror(socketError)) }
                } else {
                    lastError = "timed out"
                }
            } else if !connected {
                lastError = String(cString: strerror(errno))
            }
            if connected {
                _ = fcntl(descriptor, F_SETFL, flags)
                var one: Int32 = 1
                setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                return descriptor
            }
            Socket.closeDescriptor(descriptor)
        }
        throw .cannotConnect(host: host, port: port, reason: lastError)
    }

    /// A pipe whose read end the I/O thread polls, so another thread can wake it (`wake`). Both ends
    /// non-blocking and close-on-exec.
    static func makeWakePipe() -> (read: Int32, write: Int32) {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { fatalError("KVOClient: cannot make a pipe: \(String(cString: strerror(errno)))") }
        for end in ends {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
        }
        return (ends[0], ends[1])
    }

    /// Seconds on a monotonic clock.
    static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
}

extension Socket {
    /// The flags every `send` on a kvod socket carries: writing to a connection the server closed must fail
    /// with EPIPE, never raise SIGPIPE in the app. Linux says so per call (MSG_NOSIGNAL); Darwin has no such
    /// flag and is told once per socket instead (SO_NOSIGPIPE, in `connect`).
    static var sendFlags: Int32 {
        #if canImport(Glibc)
        Int32(MSG_NOSIGNAL)
        #else
        0
        #endif
    }

    /// `close(2)`, named apart from the methods called `close` in this module.
    static func closeDescriptor(_ descriptor: Int32) {
        #if canImport(Glibc)
        _ = Glibc.close(descriptor)
        #else
        _ = Darwin.close(descriptor)
        #endif
    }

    /// `connect(2)`, named apart from `Socket.connect(host:port:timeout:)`.
    static func connectDescriptor(_ descriptor: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t) -> Int32 {
        #if canImport(Glibc)
        Glibc.connect(descriptor, address, length)
        #else
        Darwin.connect(descriptor, address, length)
        #endif
    }
}
