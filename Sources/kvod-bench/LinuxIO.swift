#if canImport(Glibc)
import Glibc
#endif

// Linux system interfaces for the network load generator: epoll, timerfd, non-blocking TCP sockets,
// the file-descriptor limit, and per-process CPU time and resident memory from /proc.

/// Linux functions that Swift's `Glibc` module does not export (`<sys/epoll.h>` and `<sys/timerfd.h>`
/// are not in its module map), looked up once with `dlsym`. They are ordinary libc symbols with stable C
/// signatures, so declaring those signatures here is all a C shim target would have done.
struct LinuxCalls {
    let epollCreate1: @convention(c) (Int32) -> Int32
    let epollCtl: @convention(c) (Int32, Int32, Int32, UnsafeMutableRawPointer?) -> Int32
    let epollWait: @convention(c) (Int32, UnsafeMutableRawPointer?, Int32, Int32) -> Int32
    let timerfdCreate: @convention(c) (Int32, Int32) -> Int32
    let timerfdSettime: @convention(c) (Int32, Int32, UnsafePointer<itimerspec>, UnsafeMutablePointer<itimerspec>?) -> Int32

    init() {
        let process = dlopen(nil, RTLD_NOW)
        func symbol<T>(_ name: String, _ type: T.Type) -> T {
            guard let address = dlsym(process, name) else { fatalError("libc has no \(name)") }
            return unsafeBitCast(address, to: type)
        }
        epollCreate1 = symbol("epoll_create1", (@convention(c) (Int32) -> Int32).self)
        epollCtl = symbol("epoll_ctl", (@convention(c) (Int32, Int32, Int32, UnsafeMutableRawPointer?) -> Int32).self)
        epollWait = symbol("epoll_wait", (@convention(c) (Int32, UnsafeMutableRawPointer?, Int32, Int32) -> Int32).self)
        timerfdCreate = symbol("timerfd_create", (@convention(c) (Int32, Int32) -> Int32).self)
        timerfdSettime = symbol("timerfd_settime",
                                (@convention(c) (Int32, Int32, UnsafePointer<itimerspec>, UnsafeMutablePointer<itimerspec>?) -> Int32).self)
    }
}

/// One epoll instance (level-triggered). Each registered descriptor carries a 64-bit token that
/// `wait` hands back with its ready events.
final class Epoll {
    static let readable: UInt32 = 0x001      // EPOLLIN
    static let writable: UInt32 = 0x004      // EPOLLOUT
    static let error: UInt32 = 0x008         // EPOLLERR
    static let hangUp: UInt32 = 0x010        // EPOLLHUP

    // `struct epoll_event` is `{ uint32_t events; epoll_data_t data; }`, packed on x86_64 (12 bytes, data at
    // offset 4) and naturally aligned elsewhere (16 bytes, data at offset 8). It is read and written as raw bytes.
    #if arch(x86_64)
    private static let eventStride = 12
    private static let dataOffset = 4
    #else
    private static let eventStride = 16
    private static let dataOffset = 8
    #endif

    private let calls = LinuxCalls()
    private let fd: Int32
    private let capacity = 1024
    private let readyEvents: UnsafeMutableRawPointer

    init() {
        fd = calls.epollCreate1(O_CLOEXEC)
        guard fd >= 0 else { fatalError("epoll_create1: \(String(cString: strerror(errno)))") }
        readyEvents = UnsafeMutableRawPointer.allocate(byteCount: capacity * Epoll.eventStride, alignment: 8)
    }

    deinit {
        readyEvents.deallocate()
        Glibc.close(fd)
    }

    /// Registers `descriptor` for `events`, reported with `token`.
    func add(_ descriptor: Int32, token: UInt64, events: UInt32) {
        control(1 /* EPOLL_CTL_ADD */, descriptor, token: token, events: events)
    }

    /// Changes the events `descriptor` is watched for.
    func modify(_ descriptor: Int32, token: UInt64, events: UInt32) {
        control(3 /* EPOLL_CTL_MOD */, descriptor, token: token, events: events)
    }

    /// Stops watching `descriptor` (call before closing it).
    func remove(_ descriptor: Int32) {
        control(2 /* EPOLL_CTL_DEL */, descriptor, token: 0, events: 0)
    }

    /// Waits up to `timeoutMilliseconds` (0: do not wait) and calls `body(token, events)` for each ready
    /// descriptor, at most `capacity` of them per call.
    func wait(timeoutMilliseconds: Int32, _ body: (UInt64, UInt32) -> Void) {
        let count = calls.epollWait(fd, readyEvents, Int32(capacity), timeoutMilliseconds)
        guard count > 0 else {
            if count < 0 && errno != EINTR { fatalError("epoll_wait: \(String(cString: strerror(errno)))") }
            return
        }
        for index in 0..<Int(count) {
            let event = readyEvents + index * Epoll.eventStride
            body(event.loadUnaligned(fromByteOffset: Epoll.dataOffset, as: UInt64.self),
                 event.loadUnaligned(as: UInt32.self))
        }
    }

    private func control(_ operation: Int32, _ descriptor: Int32, token: UInt64, events: UInt32) {
        var event = (UInt64(0), UInt64(0))   // 16 zeroed bytes, enough for either layout
        let result = withUnsafeMutableBytes(of: &event) { bytes -> Int32 in
            bytes.storeBytes(of: events, as: UInt32.self)
            bytes.storeBytes(of: token, toByteOffset: Epoll.dataOffset, as: UInt64.self)
            return calls.epollCtl(fd, operation, descriptor, bytes.baseAddress)
        }
        if result != 0 { fatalError("epoll_ctl(\(operation), fd \(descriptor)): \(String(cString: strerror(errno)))") }
    }

    /// A periodic CLOCK_MONOTONIC timer descriptor (non-blocking): readable once per period, reading it
    /// gives the number of periods that elapsed since the last read.
    func makePeriodicTimer(periodNanoseconds: UInt64) -> Int32 {
        let timer = calls.timerfdCreate(CLOCK_MONOTONIC, O_NONBLOCK | O_CLOEXEC)
        guard timer >= 0 else { fatalError("timerfd_create: \(String(cString: strerror(errno)))") }
        let period = timespec(tv_sec: Int(periodNanoseconds / 1_000_000_000), tv_nsec: Int(periodNanoseconds % 1_000_000_000))
        var specification = itimerspec(it_interval: period, it_value: period)
        guard calls.timerfdSettime(timer, 0, &specification, nil) == 0 else {
            fatalError("timerfd_settime: \(String(cString: strerror(errno)))")
        }
        return timer
    }
}

/// Non-blocking TCP sockets on the loopback interface.
enum TCPSocket {
    /// Starts a non-blocking connection to 127.0.0.1:`port`. The connection is established (or has failed)
    /// when the socket becomes writable; `pendingError` then tells which.
    static func connectLoopback(port: UInt16) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { fatalError("socket: \(String(cString: strerror(errno))) (raise ulimit -n?)") }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = loopbackAddress(port: port)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if result != 0 && errno != EINPROGRESS {
            fatalError("connect to 127.0.0.1:\(port): \(String(cString: strerror(errno)))")
        }
        return fd
    }

    /// The socket's pending error (`SO_ERROR`): 0 once a non-blocking connect has succeeded.
    static func pendingError(_ fd: Int32) -> Int32 {
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
        return error
    }

    /// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, read back, released), for a
    /// server such as redis-server that cannot pick one itself and report it.
    static func freeLoopbackPort() -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        defer { Glibc.close(fd) }
        var address = loopbackAddress(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
                Glibc.bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else { fatalError("cannot bind a loopback port: \(String(cString: strerror(errno)))") }
        return UInt16(bigEndian: address.sin_port)
    }

    private static func loopbackAddress(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        return address
    }
}

/// Resource limits and usage of this process and of the servers it starts.
enum ProcessStats {
    /// Raises this process's soft limit on open descriptors to its hard limit (children started afterwards
    /// inherit it) and returns the new soft limit.
    @discardableResult
    static func raiseDescriptorLimit() -> Int {
        var limit = rlimit()
        getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
        if limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max
            setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
            getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
        }
        return Int(limit.rlim_cur)
    }

    /// User plus system CPU time this process has used, in seconds (microsecond resolution).
    static func ownCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
            + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1_000_000
    }

    /// User plus system CPU time of process `pid` (`utime` + `stime` of /proc/<pid>/stat), in seconds.
    /// The resolution is one clock tick (10 ms on Linux), fine over runs of seconds.
    static func cpuSeconds(pid: pid_t) -> Double {
        guard let text = readFile("/proc/\(pid)/stat"), let close = text.lastIndex(of: ")") else { return 0 }
        // After "pid (comm) " come: state(3) ppid(4) ... utime(14) stime(15); so utime is the 12th field
        // after the command name.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Resident memory of process `pid` (`VmRSS` of /proc/<pid>/status), in bytes.
    static func residentBytes(pid: pid_t) -> Int {
        guard let text = readFile("/proc/\(pid)/status") else { return 0 }
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            let kilobytes = line.split(separator: " ").compactMap { Int($0) }.first ?? 0
            return kilobytes * 1024
        }
        return 0
    }

    /// A small text file (from /proc) read whole, or nil if it cannot be read.
    static func readFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            bytes.append(contentsOf: chunk[0..<count])
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
