#if canImport(Glibc)
import Glibc
#endif

/// One client connection of the load generator: a non-blocking socket, the requests waiting to be sent,
/// and the start of a frame that has not arrived whole yet.
final class Peer {
    let fd: Int32
    /// The epoll token: this peer's index in `LoadLoop`'s table.
    let token: Int
    /// The workload's own number for this connection (a subscriber's index).
    var slot = 0
    /// Set once the non-blocking connect has completed.
    fileprivate(set) var connected = false
    fileprivate(set) var open = true
    /// Bytes received on this connection so far.
    fileprivate(set) var receivedBytes = 0
    /// Requests sent whose reply has not arrived. (Touched per reply: exempt from dynamic exclusivity
    /// checks; only the loop thread uses peers.)
    @exclusivity(unchecked) var awaitingReplies = 0
    /// Requests to send; `LoadLoop` writes all of it with as few `send` calls as the socket allows.
    let output = ByteBuffer()
    /// The bytes of an incomplete frame, kept from the last read and put before the next one.
    fileprivate let carry = ByteBuffer()
    fileprivate var watchingWritable = true
    fileprivate var queuedForFlush = false

    fileprivate init(fd: Int32, token: Int) {
        self.fd = fd
        self.token = token
    }
}

/// What a benchmark does with the frames its connections receive. The loop calls these methods from
/// `step`; subclasses override what their workload needs. The defaults count error replies, deliveries
/// nobody expected, malformed frames and connections the server closed, and print the first few.
class Workload {
    /// Error replies (`"ok":false`, Redis `-ERR`).
    var errorReplies = 0
    /// Frames the generator could not read, and deliveries this workload did not expect.
    var malformedFrames = 0
    /// Connections the server closed while the workload ran.
    var closedConnections = 0
    private var problemsPrinted = 0

    /// A reply to one request (`text` is the raw frame).
    func reply(from peer: Peer, ok: Bool, text: UnsafeRawBufferPointer) {
        peer.awaitingReplies -= 1
        if !ok {
            errorReplies += 1
            report("error reply: " + String(decoding: text.prefix(300), as: UTF8.self))
        }
    }

    /// A change delivered to a subscriber: the `Payload` bytes (kvod: the event's `new` string; Redis: the
    /// pub/sub message), read from the socket at `receivedAt` (CLOCK_MONOTONIC nanoseconds).
    func delivery(to peer: Peer, payload: UnsafeRawBufferPointer, receivedAt: UInt64) {
        malformedFrames += 1
        report("unexpected delivery")
    }

    /// A frame that is neither a reply nor a delivery the generator understands.
    func malformed(from peer: Peer, text: UnsafeRawBufferPointer) {
        malformedFrames += 1
        report("unreadable frame: " + String(decoding: text.prefix(300), as: UTF8.self))
    }

    /// The server closed `peer` (or it failed).
    func closed(_ peer: Peer) {
        closedConnections += 1
        report("the server closed connection \(peer.token)")
    }

    /// The loop's periodic timer fired `expirations` times since the last call.
    func timerFired(expirations: UInt64, now: UInt64) {}

    /// Prints the first few problems of a run on standard error.
    func report(_ message: String) {
        problemsPrinted += 1
        if problemsPrinted <= 5 {
            printError("kvod-bench: \(message)\n")
        } else if problemsPrinted == 6 {
            printError("kvod-bench: (further problems of this run not shown)\n")
        }
    }
}

/// The load generator's event loop: one thread, one level-triggered epoll set, non-blocking sockets.
///
/// - Reads: every readable connection gets one `recv` of up to 256 KiB per `step` into one shared buffer
///   (after the leftover of its previous read), and every complete frame in it is handed to the workload
///   at once; the receive time is taken once per read.
/// - Writes: requests accumulate in the connection's `output` and go out in one `send` per `step`
///   (`flush(_:)` queues, the end of `step` writes), or at once with `flushNow(_:)`. What the socket does
///   not take waits for `EPOLLOUT`.
final class LoadLoop {
    let wire: Wire
    /// The run's payload (its length and shape), which lets the kvod scanner find the value in an event
    /// without a search.
    let payload: Payload
    private let epoll = Epoll()
    @exclusivity(unchecked) private var peers: [Peer?] = []
    @exclusivity(unchecked) private var flushQueue: [Peer] = []
    /// 256 KiB: hundreds of frames per `recv`, and small enough to still be in the cache when scanned.
    private let readCapacity = 256 << 10
    private let readBuffer: UnsafeMutablePointer<UInt8>
    private var timer: Int32 = -1
    private static let timerToken = UInt64.max

    init(wire: Wire, payload: Payload) {
        self.wire = wire
        self.payload = payload
        readBuffer = UnsafeMutablePointer<UInt8>.allocate(capacity: readCapacity)
    }

    deinit {
        closeAll()
        stopTimer()
        readBuffer.deallocate()
    }

    /// Connections still open.
    var openPeers: [Peer] { peers.compactMap { $0 } }

    /// Starts a connection to 127.0.0.1:`port`; requests queued on it go out once it is established.
    func connect(port: UInt16) -> Peer {
        let fd = TCPSocket.connectLoopback(port: port)
        let peer = Peer(fd: fd, token: peers.count)
        peers.append(peer)
        epoll.add(fd, token: UInt64(peer.token), events: Epoll.readable | Epoll.writable)
        return peer
    }

    /// Opens `count` connections, `batch` at a time (each batch established before the next starts, so the
    /// server's accept backlog never overflows), and returns them. Nil if they were not all established
    /// within `timeoutSeconds`.
    func connect(port: UInt16, count: Int, batch: Int = 256, timeoutSeconds: Double = 60, sink: Workload) -> [Peer]? {
        var result: [Peer] = []
        result.reserveCapacity(count)
        let deadline = monotonicNanoseconds() + UInt64(timeoutSeconds * 1e9)
        while result.count < count {
            let started = (0..<min(batch, count - result.count)).map { _ in connect(port: port) }
            result += started
            while started.contains(where: { !$0.connected }) {
                guard started.allSatisfy({ $0.open }), monotonicNanoseconds() < deadline else { return nil }
                step(timeoutMilliseconds: 10, sink: sink)
            }
        }
        return result
    }

    /// Queues `peer`'s output to be written at the end of the current (or next) `step`.
    func flush(_ peer: Peer) {
        guard !peer.queuedForFlush else { return }
        peer.queuedForFlush = true
        flushQueue.append(peer)
    }

    /// Writes as much of `peer`'s output as the socket takes now; the rest waits for `EPOLLOUT`.
    func flushNow(_ peer: Peer, sink: Workload) {
        guard peer.open, peer.connected else { return }
        let output = peer.output
        while !output.isEmpty {
            let written = send(peer.fd, output.readable.baseAddress, output.count, Int32(MSG_NOSIGNAL))
            if written > 0 {
                output.consume(written)
            } else if written < 0 && errno == EINTR {
                continue
            } else if written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                break
            } else {
                close(peer, sink: sink)
                return
            }
        }
        let wantsWritable = !output.isEmpty
        if wantsWritable != peer.watchingWritable {
            peer.watchingWritable = wantsWritable
            epoll.modify(peer.fd, token: UInt64(peer.token), events: Epoll.readable | (wantsWritable ? Epoll.writable : 0))
        }
    }

    /// Waits up to `timeoutMilliseconds` for sockets (and the timer) to be ready, serves each once, then
    /// writes the queued output.
    func step(timeoutMilliseconds: Int32, sink: Workload) {
        epoll.wait(timeoutMilliseconds: flushQueue.isEmpty ? timeoutMilliseconds : 0) { token, events in
            if token == LoadLoop.timerToken {
                var expirations: UInt64 = 0
                if read(timer, &expirations, 8) == 8 {
                    sink.timerFired(expirations: expirations, now: monotonicNanoseconds())
                }
                return
            }
            guard let peer = peers[Int(token)], peer.open else { return }
            if events & Epoll.writable != 0 { writable(peer, sink: sink) }
            if events & (Epoll.readable | Epoll.error | Epoll.hangUp) != 0 && peer.open { readable(peer, sink: sink) }
        }
        while let peer = flushQueue.popLast() {
            peer.queuedForFlush = false
            flushNow(peer, sink: sink)
        }
    }

    /// Steps until `condition()` holds (true) or `timeoutSeconds` pass (false).
    func run(timeoutSeconds: Double, sink: Workload, until condition: () -> Bool) -> Bool {
        let deadline = monotonicNanoseconds() + UInt64(timeoutSeconds * 1e9)
        while !condition() {
            if monotonicNanoseconds() >= deadline { return false }
            step(timeoutMilliseconds: 5, sink: sink)
        }
        return true
    }

    /// Starts a periodic timer whose expirations reach `Workload.timerFired`.
    func startTimer(periodNanoseconds: UInt64) {
        stopTimer()
        timer = epoll.makePeriodicTimer(periodNanoseconds: periodNanoseconds)
        epoll.add(timer, token: LoadLoop.timerToken, events: Epoll.readable)
    }

    func stopTimer() {
        guard timer >= 0 else { return }
        epoll.remove(timer)
        Glibc.close(timer)
        timer = -1
    }

    /// Closes `peer` from this side (the workload is not told).
    func close(_ peer: Peer) {
        guard peer.open else { return }
        peer.open = false
        epoll.remove(peer.fd)
        Glibc.close(peer.fd)
        peers[peer.token] = nil
    }

    func closeAll() {
        for case let peer? in peers { close(peer) }
    }

    private func close(_ peer: Peer, sink: Workload) {
        guard peer.open else { return }
        close(peer)
        sink.closed(peer)
    }

    private func writable(_ peer: Peer, sink: Workload) {
        if !peer.connected {
            let error = TCPSocket.pendingError(peer.fd)
            guard error == 0 else {
                sink.report("connect failed: \(String(cString: strerror(error)))")
                close(peer, sink: sink)
                return
            }
            peer.connected = true
        }
        flushNow(peer, sink: sink)
    }

    private func readable(_ peer: Peer, sink: Workload) {
        let carried = peer.carry.count
        precondition(carried < readCapacity / 2, "a frame longer than \(readCapacity / 2) bytes")
        if carried > 0 { memcpy(readBuffer, peer.carry.readable.baseAddress!, carried) }
        let received = recv(peer.fd, readBuffer + carried, readCapacity - carried, 0)
        if received > 0 {
            peer.receivedBytes += received
            let total = carried + received
            let used = wire.scan(readBuffer, count: total, payload: payload, peer: peer,
                                 receivedAt: monotonicNanoseconds(), sink: sink)
            peer.carry.removeAll()
            if used < total {
                peer.carry.append(UnsafeRawBufferPointer(start: readBuffer + used, count: total - used))
            }
        } else if received == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            close(peer, sink: sink)
        }
    }
}
