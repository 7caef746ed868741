#if canImport(Glibc)
import Glibc
#endif

/// What one scale run measured: the server's resident memory before and after opening the connections,
/// and after adding the observations.
struct ScaleResult {
    var server: String
    var connections: Int
    var observationsPerConnection: Int
    var baseBytes: Int
    var connectedBytes: Int
    var observingBytes: Int
    /// Connections that answered a ping after every observation was in place.
    var held: Int
    var integrity: Integrity

    /// RSS growth per connection (opening them, one ping each), in bytes.
    var bytesPerConnection: Double { Double(connectedBytes - baseBytes) / Double(max(connections - 1, 1)) }
    /// RSS growth per observation, in bytes.
    var bytesPerObservation: Double {
        Double(observingBytes - connectedBytes) / Double(max(connections * observationsPerConnection, 1))
    }
}

/// Scale: C idle connections, each with K observations, and what they cost the server in resident memory
/// (VmRSS of /proc/<pid>/status).
///
/// 1. The first connection creates object `scale` (kvod) and pings; RSS is the base.
/// 2. The other C - 1 connect (256 at a time) and ping once; RSS again: the growth per connection.
/// 3. Every connection observes K distinct key paths `scale` `k<n>` (Redis: subscribes to channels
///    `scale.k<n>`), n unique over all observations, so each is a separate entry in the server's
///    structures (the costly case; observers of one shared key path would share its node); RSS again:
///    the growth per observation.
/// 4. Every connection pings again: all C must answer.
final class ScaleRun: Workload {
    private let server: ServerProcess
    private let loop: LoadLoop

    private init(server: ServerProcess) {
        self.server = server
        self.loop = LoadLoop(wire: server.wire, payload: Payload(length: Payload.headerLength))
    }

    static func run(server: ServerProcess, connections: Int, observationsPerConnection: Int) -> ScaleResult {
        let run = ScaleRun(server: server)
        defer { run.loop.closeAll() }
        return run.measure(connections: max(connections, 1), observations: observationsPerConnection)
    }

    private func measure(connections: Int, observations: Int) -> ScaleResult {
        let wire = server.wire
        let object = Array("scale".utf8)
        let first = loop.connect(port: server.port)
        wire.appendCreate(object: object, values: SetShape.plainString.createdValues, to: first.output)
        if case .kvod = wire { first.awaitingReplies += 1 }
        ping([first])
        settle()
        let base = server.residentBytes

        guard let others = loop.connect(port: server.port, count: connections - 1, sink: self) else {
            fail("could not open \(connections) connections to \(server.kind.label) (raise ulimit -n)")
        }
        let peers = [first] + others
        ping(others)
        settle()
        let connected = server.residentBytes

        var number = 0
        for peer in peers {
            for _ in 0..<observations {
                wire.appendSubscribe(object: object, keyPath: Array("k\(number)".utf8), to: peer.output)
                peer.awaitingReplies += 1
                number += 1
            }
            loop.flush(peer)
        }
        wait(peers, what: "observations")
        settle()
        let observing = server.residentBytes

        ping(peers)
        let held = peers.filter { $0.awaitingReplies == 0 }.count
        var integrity = Integrity()
        integrity.errors = errorReplies + malformedFrames + closedConnections + (held == connections ? 0 : 1)
        return ScaleResult(server: server.kind.label, connections: connections, observationsPerConnection: observations,
                           baseBytes: base, connectedBytes: connected, observingBytes: observing, held: held,
                           integrity: integrity)
    }

    /// Sends one ping on each peer (after anything already queued) and waits for all the replies.
    private func ping(_ peers: [Peer]) {
        for peer in peers {
            server.wire.appendPing(to: peer.output)
            peer.awaitingReplies += 1
            loop.flush(peer)
        }
        wait(peers, what: "pings")
    }

    private func wait(_ peers: [Peer], what: String) {
        let answered = loop.run(timeoutSeconds: 120, sink: self) { !peers.contains { $0.awaitingReplies > 0 } }
        if !answered {
            report("\(peers.filter { $0.awaitingReplies > 0 }.count) connections never answered their \(what)")
        }
    }

    /// Lets the server finish what it was doing (freeing buffers) before its memory is read.
    private func settle() {
        _ = loop.run(timeoutSeconds: 0.2, sink: self) { false }
    }
}

/// What one spread run measured.
struct SpreadResult {
    var server: String
    var objects: Int
    var subscribers: Int
    var sets: UInt64
    var deliveries: UInt64
    var setSeconds: Double
    var deliverySeconds: Double
    var integrity: Integrity
    var serverCPU: Double
    var generatorCPU: Double

    var setsPerSecond: Double { setSeconds > 0 ? Double(sets) / setSeconds : 0 }
    var deliveriesPerSecond: Double { deliverySeconds > 0 ? Double(deliveries) / deliverySeconds : 0 }
}

/// Spread: N objects `o<i>` (kvod: each `{"v": ""}`; Redis: channels `o<i>`), each observed once at key
/// path `v` by one of S subscriber connections (object i by subscriber i mod S). One publisher pipelines
/// sets of `v` on objects picked at random (xorshift, fixed seed), at most `window` awaiting a reply and
/// `lag` not yet delivered. Every set is delivered exactly once; a `SpreadChecker` counts lost, duplicate
/// and reordered deliveries.
final class SpreadRun: Workload {
    private let server: ServerProcess
    private let loop: LoadLoop
    private let payload: Payload
    private var names: [[UInt8]] = []
    private var publisher: Peer!
    private var subscribers: [Peer] = []
    // Per-delivery state, exempt from dynamic exclusivity checks as in FanOutRun.
    @exclusivity(unchecked) private var checker: SpreadChecker
    @exclusivity(unchecked) private var sequence: UInt64 = 0
    @exclusivity(unchecked) private var acknowledged: UInt64 = 0
    @exclusivity(unchecked) private var deliveries: UInt64 = 0
    private var timing = false
    private var random: UInt64 = 0x9E37_79B9_7F4A_7C15

    private init(server: ServerProcess, subscribers: Int, payloadLength: Int) {
        self.server = server
        self.payload = Payload(length: payloadLength)
        self.loop = LoadLoop(wire: server.wire, payload: payload)
        self.checker = SpreadChecker(subscribers: subscribers)
    }

    static func run(server: ServerProcess, objects: Int, subscribers: Int, payloadLength: Int, seconds: Double,
                    window: Int, lag: Int) -> SpreadResult {
        let run = SpreadRun(server: server, subscribers: subscribers, payloadLength: payloadLength)
        defer { run.loop.closeAll() }
        run.setUp(objects: objects, subscribers: subscribers)
        return run.measure(seconds: seconds, window: window, lag: lag)
    }

    private func setUp(objects: Int, subscribers count: Int) {
        let wire = server.wire
        names = (0..<objects).map { Array("o\($0)".utf8) }
        publisher = loop.connect(port: server.port)
        if case .kvod = wire {
            // Creates, pipelined 1,000 at a time.
            var created = 0
            let done = loop.run(timeoutSeconds: 300, sink: self) {
                while created < objects && publisher.awaitingReplies < 1000 {
                    wire.appendCreate(object: names[created], values: SetShape.plainString.createdValues, to: publisher.output)
                    publisher.awaitingReplies += 1
                    created += 1
                }
                loop.flush(publisher)
                return created == objects && publisher.awaitingReplies == 0
            }
            guard done, errorReplies == 0 else { fail("creating \(objects) objects on \(server.kind.label) failed") }
        }
        guard let peers = loop.connect(port: server.port, count: count, sink: self) else {
            fail("could not open \(count) subscriber connections to \(server.kind.label)")
        }
        subscribers = peers
        for (index, subscriber) in subscribers.enumerated() {
            subscriber.slot = index
            for object in stride(from: index, to: objects, by: count) {
                wire.appendSubscribe(object: names[object], keyPath: Array("v".utf8), to: subscriber.output)
                subscriber.awaitingReplies += 1
            }
            loop.flush(subscriber)
        }
        let ready = loop.run(timeoutSeconds: 300, sink: self) { !subscribers.contains { $0.awaitingReplies > 0 } }
        guard ready, errorReplies == 0, closedConnections == 0 else {
            fail("observing \(objects) objects on \(server.kind.label) failed")
        }
    }

    private func measure(seconds: Double, window: Int, lag: Int) -> SpreadResult {
        let serverCPUStart = server.cpuSeconds
        let generatorCPUStart = ProcessStats.ownCPUSeconds()
        let start = monotonicNanoseconds()
        let deadline = start + UInt64(seconds * 1e9)
        var lastAcknowledgement = start
        var lastDelivery = start
        timing = true

        func step() {
            let acknowledgedBefore = acknowledged
            let deliveriesBefore = deliveries
            loop.step(timeoutMilliseconds: 1, sink: self)
            let now = monotonicNanoseconds()
            if acknowledged != acknowledgedBefore { lastAcknowledgement = now }
            if deliveries != deliveriesBefore { lastDelivery = now }
        }

        while monotonicNanoseconds() < deadline {
            var budget = min(window - Int(sequence - acknowledged), lag - Int(sequence - checker.distinct))
            if budget > 0 {
                let now = monotonicNanoseconds()
                while budget > 0 {
                    server.wire.appendPublish(object: names[nextObject()], payload: payload, sequence: sequence,
                                              timestamp: now, to: publisher.output)
                    publisher.awaitingReplies += 1
                    sequence += 1
                    budget -= 1
                }
                loop.flushNow(publisher, sink: self)
            }
            step()
        }
        let drainDeadline = monotonicNanoseconds() + 10_000_000_000
        while (acknowledged < sequence || checker.distinct < sequence) && closedConnections == 0
                && monotonicNanoseconds() < drainDeadline {
            step()
        }
        let end = monotonicNanoseconds()
        timing = false

        var integrity = Integrity()
        integrity.lost = checker.lost(published: sequence)
        integrity.reordered = checker.reordered
        integrity.duplicates = checker.duplicates
        integrity.errors = errorReplies + malformedFrames + closedConnections + (server.isRunning ? 0 : 1)
            + (acknowledged < sequence ? 1 : 0)
        let wall = Double(end - start) / 1e9
        return SpreadResult(server: server.kind.label, objects: names.count, subscribers: subscribers.count,
                            sets: acknowledged, deliveries: deliveries,
                            setSeconds: Double(lastAcknowledgement - start) / 1e9,
                            deliverySeconds: Double(lastDelivery - start) / 1e9, integrity: integrity,
                            serverCPU: (server.cpuSeconds - serverCPUStart) / wall,
                            generatorCPU: (ProcessStats.ownCPUSeconds() - generatorCPUStart) / wall)
    }

    /// xorshift64: a uniformly spread object index, the same sequence on every run.
    private func nextObject() -> Int {
        random ^= random << 13
        random ^= random >> 7
        random ^= random << 17
        return Int(random % UInt64(names.count))
    }

    override func reply(from peer: Peer, ok: Bool, text: UnsafeRawBufferPointer) {
        super.reply(from: peer, ok: ok, text: text)
        if timing && peer === publisher { acknowledged += 1 }
    }

    override func delivery(to peer: Peer, payload bytes: UnsafeRawBufferPointer, receivedAt: UInt64) {
        guard bytes.count == payload.length, let (number, _) = Payload.decode(bytes) else {
            malformed(from: peer, text: bytes)
            return
        }
        deliveries += 1
        checker.record(number, subscriber: peer.slot)
    }
}
