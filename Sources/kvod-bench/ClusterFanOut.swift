#if canImport(Glibc)
import Glibc
#endif

/// `kvod-bench cluster`'s fan-out rows: deliveries/s to observers spread over a cluster's nodes, and the
/// kvod CPU time each delivery costs. One publisher connection (on the first port) sets object `fan` key
/// path `v` as fast as the cluster takes it, at most `window` sets awaiting their reply and the slowest
/// observer at most `lag` sets behind; every observer (its own connection, on the port given for it)
/// observes `fan`/`v` with options ["new"]. After the timed part the publisher stops and the run waits
/// (up to 10 s) for the outstanding replies and deliveries.
///
/// The object must exist on every node before `run` (the caller creates it and waits for it). Everything
/// runs on the calling thread (`LoadLoop`, one epoll set).
final class ClusterFanOut: Workload {
    /// What one run measured.
    struct Result {
        var observers: Int
        var sets: UInt64
        var deliveries: UInt64
        /// From the first set to the last delivery.
        var seconds: Double
        /// CPU time (utime + stime) of the kvod processes and of the NATS servers over the run.
        var kvodCPUSeconds: Double
        var natsCPUSeconds: Double
        /// CPU time of this process (the publisher and every observer) over the run.
        var generatorCPUSeconds: Double

        var deliveriesPerSecond: Double { seconds > 0 ? Double(deliveries) / seconds : 0 }
        var setsPerSecond: Double { seconds > 0 ? Double(sets) / seconds : 0 }
        /// kvod CPU microseconds per delivery (every node's CPU, the applying included).
        var kvodMicrosecondsPerDelivery: Double { deliveries > 0 ? kvodCPUSeconds * 1e6 / Double(deliveries) : 0 }
    }

    private static let object = Array("fan".utf8)
    private static let keyPath = Array("v".utf8)
    private let loop: LoadLoop
    private let payload = Payload(length: 48)
    private var publisher: Peer!
    private var observers: [Peer] = []
    @exclusivity(unchecked) private var received: [UInt64] = []
    @exclusivity(unchecked) private var sent: UInt64 = 0
    @exclusivity(unchecked) private var acknowledged: UInt64 = 0
    @exclusivity(unchecked) private var deliveries: UInt64 = 0

    private override init() {
        loop = LoadLoop(wire: .kvod, payload: payload)
    }

    /// One run: the publisher on `publisherPort`, one observer on each of `observerPorts`.
    static func run(publisherPort: Int, observerPorts: [Int], kvodPIDs: [pid_t], natsPIDs: [pid_t], seconds: Double,
                    window: Int = 64, lag: Int = 2_000) -> Result {
        let run = ClusterFanOut()
        defer { run.loop.closeAll() }
        run.setUp(publisherPort: publisherPort, observerPorts: observerPorts)
        return run.measure(seconds: seconds, window: window, lag: lag, kvodPIDs: kvodPIDs, natsPIDs: natsPIDs)
    }

    private func setUp(publisherPort: Int, observerPorts: [Int]) {
        publisher = loop.connect(port: UInt16(publisherPort))
        var byPort: [Int: Int] = [:]
        for port in observerPorts { byPort[port, default: 0] += 1 }
        for (port, count) in byPort.sorted(by: { $0.key < $1.key }) {
            guard let peers = loop.connect(port: UInt16(port), count: count, sink: self) else {
                fail("could not open \(count) observer connections to port \(port)")
            }
            observers += peers
        }
        received = [UInt64](repeating: 0, count: observers.count)
        for (index, observer) in observers.enumerated() {
            observer.slot = index
            loop.wire.appendSubscribe(object: ClusterFanOut.object, keyPath: ClusterFanOut.keyPath, to: observer.output)
            observer.awaitingReplies += 1
            loop.flush(observer)
        }
        let ready = loop.run(timeoutSeconds: 30, sink: self) { observers.allSatisfy { $0.awaitingReplies == 0 } }
        guard ready, errorReplies == 0, closedConnections == 0 else { fail("setting up \(observers.count) observers failed") }
    }

    private func measure(seconds: Double, window: Int, lag: Int, kvodPIDs: [pid_t], natsPIDs: [pid_t]) -> Result {
        let kvodStart = kvodPIDs.reduce(0) { $0 + ProcessStats.cpuSeconds(pid: $1) }
        let natsStart = natsPIDs.reduce(0) { $0 + ProcessStats.cpuSeconds(pid: $1) }
        let generatorStart = ProcessStats.ownCPUSeconds()
        let start = monotonicNanoseconds()
        let deadline = start + UInt64(seconds * 1e9)
        var lastDelivery = start
        while monotonicNanoseconds() < deadline {
            fill(window: window, lag: lag)
            let before = deliveries
            loop.step(timeoutMilliseconds: 1, sink: self)
            if deliveries != before { lastDelivery = monotonicNanoseconds() }
        }
        let expected = sent * UInt64(observers.count)
        let drainDeadline = monotonicNanoseconds() + 10_000_000_000
        while (acknowledged < sent || deliveries < expected) && monotonicNanoseconds() < drainDeadline {
            let before = deliveries
            loop.step(timeoutMilliseconds: 5, sink: self)
            if deliveries != before { lastDelivery = monotonicNanoseconds() }
        }
        if deliveries < expected { report("\(expected - deliveries) of \(expected) deliveries missing after 10 s") }
        if errorReplies > 0 || closedConnections > 0 { fail("the fan-out run had \(errorReplies) error replies, \(closedConnections) closed connections") }
        return Result(observers: observers.count, sets: acknowledged, deliveries: deliveries,
                      seconds: Double(lastDelivery - start) / 1e9,
                      kvodCPUSeconds: kvodPIDs.reduce(0) { $0 + ProcessStats.cpuSeconds(pid: $1) } - kvodStart,
                      natsCPUSeconds: natsPIDs.reduce(0) { $0 + ProcessStats.cpuSeconds(pid: $1) } - natsStart,
                      generatorCPUSeconds: ProcessStats.ownCPUSeconds() - generatorStart)
    }

    /// Sends sets while fewer than `window` await their reply and the slowest observer is under `lag` behind.
    private func fill(window: Int, lag: Int) {
        let slowest = received.min() ?? 0
        var queued = false
        while sent - acknowledged < UInt64(window), sent - slowest < UInt64(lag) {
            loop.wire.appendPublish(object: ClusterFanOut.object, payload: payload, sequence: sent,
                                    timestamp: monotonicNanoseconds(), to: publisher.output)
            sent += 1
            queued = true
        }
        if queued { loop.flush(publisher) }
    }

    override func reply(from peer: Peer, ok: Bool, text: UnsafeRawBufferPointer) {
        super.reply(from: peer, ok: ok, text: text)
        if peer === publisher { acknowledged += 1 }
    }

    override func delivery(to peer: Peer, payload: UnsafeRawBufferPointer, receivedAt: UInt64) {
        deliveries += 1
        received[peer.slot] += 1
    }
}
