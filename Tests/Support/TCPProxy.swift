import Foundation

/// A TCP proxy on 127.0.0.1 in front of a kvod, for tests of a client's resilience: `cut()` closes every
/// connection through it (a dropped connection, kvod still running), `blackhole()` stops forwarding on
/// the current connections while keeping them open (a half-open connection). New connections are
/// forwarded normally; `bytesFromServer` counts what kvod sent, `blackholedFromClients` keeps what clients sent into a blackhole. `partition()` stops all forwarding, on the
/// current connections and on new ones, without reading or dropping anything (a network partition: bytes
/// wait in the sockets' buffers), until `heal()`. One thread accepts; one thread per connection pair forwards. Stopped on deinit.
final class TCPProxy: Sendable {
    /// The proxy's port on 127.0.0.1.
    let port: Int
    private let relay: TCPRelay

    init(targetPort: Int) throws {
        relay = try TCPRelay(targetPort: targetPort)
        port = relay.port
        relay.start()
    }

    /// Stops the proxy: its connections are closed and its threads end.
    deinit { relay.stop() }

    /// Closes every current connection (both sides).
    func cut() { relay.cut() }

    /// Stops forwarding on every current connection, keeping them open.
    func blackhole() { relay.blackhole() }

    /// Stops forwarding in both directions on every connection, present and future, leaving what was sent
    /// unread in the sockets (connections still open: a peer notices only by its own timeouts).
    func partition() { relay.partition() }

    /// Ends `partition()`: forwarding resumes where it stopped, on the connections both peers kept.
    func heal() { relay.heal() }

    /// The number of connections accepted so far.
    var connectionCount: Int { relay.connectionCount }

    /// The bytes forwarded from kvod to clients so far.
    var bytesFromServer: Int { relay.bytesFromServer }

    /// What clients sent on blackholed connections (read and not forwarded), as text: a test waits for its
    /// requests to be there instead of for a while.
    var blackholedFromClients: String { relay.blackholedFromClients }
}

/// What `TCPProxy` runs: the listener, the pairs and the threads, which hold this and not the proxy, so that the
/// proxy's deinit runs when its test lets go of it and stops them (`stop`).
private final class TCPRelay: @unchecked Sendable {
    // @unchecked: `pairs`, `partitioned` and `stopped` are only touched under `lock`; the descriptors are immutable.
    let port: Int
    private let targetPort: Int
    private let listener: Int32
    private let lock = NSLock()
    private var pairs: [(client: Int32, server: Int32, blackholed: Bool)] = []
    private var stopped = false
    private var partitioned = false
    private var accepted = 0
    private var forwardedFromServer = 0
    private var droppedFromClients: [UInt8] = []

    init(targetPort: Int) throws {
        self.targetPort = targetPort
        (listener, port) = try LoopbackListener.open(backlog: 64)
    }

    /// Starts the accepting thread (which holds the relay until `stop`).
    func start() {
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    /// Closes every connection and the listener: the accepting thread and every forwarding thread end.
    func stop() {
        lock.lock()
        stopped = true
        partitioned = false
        lock.unlock()
        cut()
        shutdown(listener, Int32(SHUT_RDWR))
    }

    deinit { close(listener) }

    /// Closes every current connection (both sides).
    func cut() {
        lock.lock()
        for pair in pairs {
            shutdown(pair.client, Int32(SHUT_RDWR))
            shutdown(pair.server, Int32(SHUT_RDWR))
        }
        lock.unlock()
    }

    /// Stops forwarding on every current connection, keeping them open.
    func blackhole() {
        lock.lock()
        for index in pairs.indices { pairs[index].blackholed = true }
        lock.unlock()
    }

    /// Stops forwarding in both directions on every connection, present and future, leaving what was sent
    /// unread in the sockets (connections still open: a peer notices only by its own timeouts).
    func partition() {
        lock.lock()
        partitioned = true
        lock.unlock()
    }

    /// Ends `partition()`: forwarding resumes where it stopped, on the connections both peers kept.
    func heal() {
        lock.lock()
        partitioned = false
        lock.unlock()
    }

    private var isStopped: Bool {
        lock.lock()
        defer { lock.unlock() }
        return stopped
    }

    private var isPartitioned: Bool {
        lock.lock()
        defer { lock.unlock() }
        return partitioned
    }

    /// The number of connections accepted so far.
    var connectionCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return accepted
    }

    /// The bytes forwarded from kvod to clients so far.
    var bytesFromServer: Int {
        lock.lock()
        defer { lock.unlock() }
        return forwardedFromServer
    }

    /// What clients sent on blackholed connections (read and not forwarded), as text: a test waits for its
    /// requests to be there instead of for a while.
    var blackholedFromClients: String {
        lock.lock()
        defer { lock.unlock() }
        return String(decoding: droppedFromClients, as: UTF8.self)
    }

    fileprivate func isBlackholed(_ client: Int32) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        return pairs.first { $0.client == client }?.blackholed ?? false
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 { return }
            guard let server = try? KVOConnectionFreeSocket.connect(port: targetPort) else {
                close(client)
                continue
            }
            // Forward small writes at once, as the peers (which set TCP_NODELAY themselves) expect: Nagle's
            // algorithm on the proxy's sockets, against delayed acknowledgements, held request-reply
            // exchanges through it (NATS publishes and their acknowledgements) for tens of milliseconds each.
            var one: Int32 = 1
            for descriptor in [client, server] {
                setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            }
            lock.lock()
            let isStopped = stopped
            if !isStopped {
                pairs.append((client, server, false))
                accepted += 1
            }
            lock.unlock()
            if isStopped {
                close(client)
                close(server)
                return
            }
            Thread.detachNewThread { [self] in forward(client: client, server: server) }
        }
    }

    private func forward(client: Int32, server: Int32) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        var entries = [pollfd(fd: client, events: Int16(POLLIN), revents: 0), pollfd(fd: server, events: Int16(POLLIN), revents: 0)]
        loop: while !isStopped {
            if isPartitioned {
                usleep(20_000)
                continue
            }
            entries[0].revents = 0
            entries[1].revents = 0
            if poll(&entries, 2, 100) < 0 { break }
            // Partitioned during the poll: what arrived stays unread (forwarding it would leak past the cut).
            if isPartitioned { continue }
            for (from, to) in [(0, 1), (1, 0)] where entries[from].revents != 0 {
                let count = recv(entries[from].fd, &buffer, buffer.count, 0)
                if count <= 0 { break loop }
                if isBlackholed(client) {
                    if from == 0 {
                        lock.lock()
                        droppedFromClients += buffer[0..<count]
                        lock.unlock()
                    }
                    continue
                }
                if from == 1 {
                    lock.lock()
                    forwardedFromServer += count
                    lock.unlock()
                }
                var sent = 0
                while sent < count {
                    let result = buffer.withUnsafeBytes { send(entries[to].fd, $0.baseAddress! + sent, count - sent, Int32(MSG_NOSIGNAL)) }
                    if result <= 0 { break loop }
                    sent += result
                }
            }
        }
        lock.lock()
        pairs.removeAll { $0.client == client }
        lock.unlock()
        shutdown(client, Int32(SHUT_RDWR))
        shutdown(server, Int32(SHUT_RDWR))
        close(client)
        close(server)
    }
}

/// Connects a plain socket to 127.0.0.1:`port`.
private enum KVOConnectionFreeSocket {
    static func connect(port: Int) throws -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard status == 0 else {
            close(descriptor)
            throw POSIXError(.ECONNREFUSED)
        }
        return descriptor
    }
}
