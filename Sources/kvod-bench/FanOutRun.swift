#if canImport(Glibc)
import Glibc
#endif
import KVOServer

/// What one throughput or latency run measured.
struct FanOutResult {
    /// The server's label; a kvod whose subscribers asked for compact events is "kvod compact".
    var server: String
    /// The event encoding kvod's subscribers asked for (`--events`); nil for Redis (it has one).
    var events: EventEncoding?
    var subscribers: Int
    var payloadBytes: Int
    /// What each set looked like (value shape, `id`, key path).
    var shape: SetShape
    /// Sets (kvod) or publishes (Redis) acknowledged.
    var sets: UInt64
    var deliveries: UInt64
    /// From the first set to the last reply, and to the last delivery.
    var setSeconds: Double
    var deliverySeconds: Double
    var integrity: Integrity
    /// CPU used over the run, in cores (1.0 = one core busy all the time).
    var serverCPU: Double
    var generatorCPU: Double
    /// The server's CPU time over the run (utime + stime from /proc/<pid>/stat), in seconds.
    var serverCPUSeconds: Double
    /// End-to-end latency per delivery (fixed-rate runs; empty for pipelined ones).
    var latency: LatencyHistogram
    /// True for a fixed-rate (latency) run, false for a pipelined (throughput) one.
    var fixedRate: Bool
    /// Bytes the subscribers received per delivery: the size of one event on the wire (kvod's JSON
    /// event line, Redis's RESP `message` array), since subscribers receive nothing else while timed.
    var wireBytesPerDelivery: Double

    var setsPerSecond: Double { setSeconds > 0 ? Double(sets) / setSeconds : 0 }
    var deliveriesPerSecond: Double { deliverySeconds > 0 ? Double(deliveries) / deliverySeconds : 0 }
    /// Server CPU microseconds per acknowledged set (or publish), and per delivery.
    var serverMicrosecondsPerSet: Double { sets > 0 ? serverCPUSeconds * 1e6 / Double(sets) : 0 }
    var serverMicrosecondsPerDelivery: Double { deliveries > 0 ? serverCPUSeconds * 1e6 / Double(deliveries) : 0 }
}

/// Throughput and latency: S subscribers (each its own connection) observe one key path (kvod: object
/// `bench`, key path `v`, options ["new"], events in the full encoding or, after a `hello` asking for them,
/// the compact one) or subscribe to one channel (Redis: `bench`), and one publisher sets that key path
/// (kvod) or publishes on that channel (Redis). Each value is a `Payload` carrying its sequence number and
/// send time; every subscriber checks its stream with a `SequenceChecker`.
///
/// Pacing:
/// - `pipelined`: as fast as the server takes them, with at most `window` sets awaiting their reply and
///   the slowest subscriber at most `lag` sets behind the publisher (so no server ever queues more than
///   `lag` events for one subscriber, well under kvod's and Redis's 32 MiB output limits).
/// - `fixedRate`: `rate` sets per second from a periodic timer (sent as soon as it fires; each payload
///   carries the time it was written), and the latency of every delivery after the warm-up is recorded.
///
/// After the timed part the publisher stops and the run waits (up to 10 s) for the outstanding replies
/// and deliveries; whatever has not arrived by then counts as lost.
final class FanOutRun: Workload {
    enum Pace {
        case pipelined(window: Int, lag: Int)
        case fixedRate(perSecond: Int)
        /// Exactly `sets` sets, at most `window` awaiting their reply, then the run ends once every reply
        /// and delivery is in (`kvod-bench callgrind`: a fixed amount of work, not a fixed time).
        case counted(sets: Int, window: Int)
    }

    /// A deliberate publisher bug, to prove that the checker notices (`kvod-bench selftest`). Each happens
    /// once, at sequence number 1000: `skip` never sends it (every subscriber must count one lost),
    /// `duplicate` sends it again after 1001 (one duplicate each), `reorder` sends 1001 before it (one
    /// reordered each).
    enum Fault: String, CaseIterable {
        case skip, duplicate, reorder
    }

    static let faultSequence: UInt64 = 1000

    private let server: ServerProcess
    private let loop: LoadLoop
    private let payload: Payload
    private let shape: SetShape
    private let object = Array("bench".utf8)
    private let fault: Fault?
    private let events: EventEncoding
    private var publisher: Peer!
    private var subscribers: [Peer] = []
    // The per-delivery state is exempt from dynamic exclusivity checks (they cost more than the work on
    // every delivery); only the loop thread touches it, never through overlapping accesses.
    @exclusivity(unchecked) private var checkers: [SequenceChecker] = []
    @exclusivity(unchecked) private var histogram = LatencyHistogram()
    /// The next sequence number to publish; also how many have been published.
    @exclusivity(unchecked) private var sequence: UInt64 = 0
    /// Sets sent (more than `sequence` with a duplicate fault, fewer with a skip).
    @exclusivity(unchecked) private var transmitted: UInt64 = 0
    @exclusivity(unchecked) private var acknowledged: UInt64 = 0
    @exclusivity(unchecked) private var deliveries: UInt64 = 0
    private var timing = false
    /// Deliveries of sets sent from this time on are recorded in the latency histogram.
    private var recordLatencyFrom = UInt64.max

    private init(server: ServerProcess, payloadLength: Int, shape: SetShape, fault: Fault?, events: EventEncoding) {
        self.server = server
        self.events = events
        self.shape = shape
        self.payload = Payload(length: payloadLength, shape: shape.value)
        self.loop = LoadLoop(wire: server.wire, payload: payload)
        self.fault = fault
    }

    /// Runs one throughput or latency measurement against a running server.
    /// `profile`: record the server with `perf record -g` into this file during the timed part.
    /// `events`: the encoding kvod's subscribers ask for (ignored for Redis).
    static func run(server: ServerProcess, subscribers: Int, payloadLength: Int, shape: SetShape = .plainString,
                    seconds: Double, pace: Pace, warmupSeconds: Double = 0, fault: Fault? = nil,
                    profile: (perf: String, output: String)? = nil, events: EventEncoding = .full) -> FanOutResult {
        let run = FanOutRun(server: server, payloadLength: payloadLength, shape: shape, fault: fault,
                            events: server.wire == .kvod ? events : .full)
        defer { run.loop.closeAll() }
        run.setUp(subscribers: subscribers)
        let profiler = profile.map { Profiler(perf: $0.perf, pid: server.pid, output: $0.output) }
        return run.measure(seconds: seconds, pace: pace, warmupSeconds: warmupSeconds, profiler: profiler)
    }

    private func setUp(subscribers count: Int) {
        let wire = server.wire
        publisher = loop.connect(port: server.port)
        let credentials: (user: String, password: String)?
        if case let .kvod(storage) = server.kind { credentials = storage.credentials } else { credentials = nil }
        if let credentials {
            wire.appendAuth(user: credentials.user, password: credentials.password, to: publisher.output)
            publisher.awaitingReplies += 1
        }
        if case .kvod = wire {
            wire.appendCreate(object: object, values: shape.createdValues, to: publisher.output)
            publisher.awaitingReplies += 1
            loop.flush(publisher)
        }
        if credentials != nil {
            // The object must exist before the subscribers observe it; without authentication the
            // create is simply first, here each connection's requests wait for its own password check.
            guard loop.run(timeoutSeconds: 30, sink: self, until: { publisher.awaitingReplies == 0 }), errorReplies == 0 else {
                fail("authenticating and creating the object on \(server.kind.label) failed")
            }
        }
        guard let peers = loop.connect(port: server.port, count: count, sink: self) else {
            fail("could not open \(count) subscriber connections to \(server.kind.label)")
        }
        subscribers = peers
        checkers = [SequenceChecker](repeating: SequenceChecker(), count: count)
        for (index, subscriber) in subscribers.enumerated() {
            subscriber.slot = index
            if events == .compact {
                wire.appendHello(events: events, to: subscriber.output)
                subscriber.awaitingReplies += 1
            }
            if let credentials {
                wire.appendAuth(user: credentials.user, password: credentials.password, to: subscriber.output)
                subscriber.awaitingReplies += 1
            }
            wire.appendSubscribe(object: object, keyPath: shape.keyPath, to: subscriber.output)
            subscriber.awaitingReplies += 1
            loop.flush(subscriber)
        }
        let ready = loop.run(timeoutSeconds: 30, sink: self) {
            publisher.awaitingReplies == 0 && subscribers.allSatisfy { $0.awaitingReplies == 0 }
        }
        guard ready, errorReplies == 0, closedConnections == 0 else {
            fail("setting up \(count) subscribers on \(server.kind.label) failed")
        }
    }

    private func measure(seconds: Double, pace: Pace, warmupSeconds: Double, profiler: Profiler?) -> FanOutResult {
        let serverCPUStart = server.cpuSeconds
        let generatorCPUStart = ProcessStats.ownCPUSeconds()
        let subscriberBytesStart = subscribers.reduce(0) { $0 + $1.receivedBytes }
        let start = monotonicNanoseconds()
        let deadline = start + UInt64(seconds * 1e9)
        var lastAcknowledgement = start
        var lastDelivery = start
        timing = true

        func step(_ timeoutMilliseconds: Int32) {
            let acknowledgedBefore = acknowledged
            let deliveriesBefore = deliveries
            loop.step(timeoutMilliseconds: timeoutMilliseconds, sink: self)
            if acknowledged != acknowledgedBefore || deliveries != deliveriesBefore {
                let now = monotonicNanoseconds()
                if acknowledged != acknowledgedBefore { lastAcknowledgement = now }
                if deliveries != deliveriesBefore { lastDelivery = now }
            }
        }

        switch pace {
        case .pipelined(let window, let lag):
            while monotonicNanoseconds() < deadline {
                fill(window: window, lag: lag)
                step(1)
            }
        case .counted(let total, let window):
            while sequence < UInt64(total) && publisher.open {
                fill(window: min(window, Int(UInt64(total) - sequence) + Int(transmitted - acknowledged)), lag: window * 4)
                step(50)
            }
        case .fixedRate(let rate):
            recordLatencyFrom = start + UInt64(warmupSeconds * 1e9)
            loop.startTimer(periodNanoseconds: UInt64(1e9 / Double(max(rate, 1))))
            while monotonicNanoseconds() < deadline { step(5) }
            loop.stopTimer()
        }
        profiler?.stop()

        // Drain: every reply, and every subscriber up to the last sequence number.
        let published = sequence
        let drainDeadline = monotonicNanoseconds() + 10_000_000_000
        func drained() -> Bool {
            (acknowledged >= transmitted || !publisher.open)
                && zip(subscribers, checkers).allSatisfy { subscriber, checker in !subscriber.open || checker.next >= published }
        }
        while !drained() && monotonicNanoseconds() < drainDeadline { step(5) }
        let end = monotonicNanoseconds()
        timing = false

        var integrity = Integrity()
        for checker in checkers {
            integrity.lost += checker.lost(published: published)
            integrity.reordered += checker.reordered
            integrity.duplicates += checker.duplicates
        }
        integrity.errors = errorReplies + malformedFrames + closedConnections + (server.isRunning ? 0 : 1)
        if acknowledged < transmitted {
            report("\(transmitted - acknowledged) sets were never acknowledged")
            integrity.errors += 1
        }
        let wall = Double(end - start) / 1e9
        let serverCPUSeconds = server.cpuSeconds - serverCPUStart
        return FanOutResult(
            server: server.kind.label + (events == .compact ? " compact" : ""), events: server.wire == .kvod ? events : nil,
            subscribers: subscribers.count, payloadBytes: payload.length, shape: shape,
            sets: acknowledged, deliveries: deliveries,
            setSeconds: Double(lastAcknowledgement - start) / 1e9, deliverySeconds: Double(lastDelivery - start) / 1e9,
            integrity: integrity,
            serverCPU: serverCPUSeconds / wall,
            generatorCPU: (ProcessStats.ownCPUSeconds() - generatorCPUStart) / wall,
            serverCPUSeconds: serverCPUSeconds,
            latency: histogram, fixedRate: recordLatencyFrom != .max,
            wireBytesPerDelivery: Double(subscribers.reduce(0) { $0 + $1.receivedBytes } - subscriberBytesStart)
                / Double(max(deliveries, 1)))
    }

    /// Queues as many sets as the window and the slowest subscriber allow, and sends them in one write.
    private func fill(window: Int, lag: Int) {
        var slowest = sequence
        for checker in checkers where checker.next < slowest { slowest = checker.next }
        var budget = min(window - Int(transmitted - acknowledged), lag - Int(sequence - slowest))
        guard budget > 0 else { return }
        let now = monotonicNanoseconds()
        while budget > 0 {
            publishNext(timestamp: now)
            budget -= 1
        }
        loop.flushNow(publisher, sink: self)
    }

    /// Publishes the next sequence number (or plays the fault when it is due).
    private func publishNext(timestamp: UInt64) {
        if let fault, sequence == FanOutRun.faultSequence {
            switch fault {
            case .skip:
                break
            case .duplicate:
                send(sequence, timestamp)
                send(sequence + 1, timestamp)
                send(sequence, timestamp)
            case .reorder:
                send(sequence + 1, timestamp)
                send(sequence, timestamp)
            }
            sequence += fault == .skip ? 1 : 2
            return
        }
        send(sequence, timestamp)
        sequence += 1
    }

    private func send(_ number: UInt64, _ timestamp: UInt64) {
        server.wire.appendPublish(object: object, keyPath: shape.nested ? shape.keyPath : nil,
                                  requestID: shape.withID ? transmitted + 1 : nil, payload: payload, sequence: number,
                                  timestamp: timestamp, to: publisher.output)
        publisher.awaitingReplies += 1
        transmitted += 1
    }

    override func reply(from peer: Peer, ok: Bool, text: UnsafeRawBufferPointer) {
        super.reply(from: peer, ok: ok, text: text)
        if timing && peer === publisher { acknowledged += 1 }
    }

    override func delivery(to peer: Peer, payload bytes: UnsafeRawBufferPointer, receivedAt: UInt64) {
        guard bytes.count == payload.length, let (number, sentAt) = Payload.decode(bytes, at: payload.headerOffset) else {
            malformed(from: peer, text: bytes)
            return
        }
        deliveries += 1
        checkers[peer.slot].record(number)
        if sentAt >= recordLatencyFrom && receivedAt >= sentAt {
            histogram.record(receivedAt - sentAt)
        }
    }

    override func timerFired(expirations: UInt64, now: UInt64) {
        for _ in 0..<expirations { publishNext(timestamp: now) }
        loop.flushNow(publisher, sink: self)
    }
}

/// `perf record -g` attached to a server for the timed part of a run; the output file is for
/// `perf report -i <file>` (see scripts/bench-profile.sh).
final class Profiler {
    private let pid: pid_t

    init(perf: String, pid server: pid_t, output: String) {
        pid = ChildProcesses.spawn([perf, "record", "-g", "-q", "-o", output, "-p", String(server)], standardOutput: nil)
        usleep(300_000)   // let perf attach before the load starts
    }

    /// Stops recording (SIGINT makes perf write its file) and waits for perf to exit.
    func stop() {
        kill(pid, SIGINT)
        if !ChildProcesses.wait(pid, seconds: 60) {
            kill(pid, SIGKILL)
            _ = ChildProcesses.wait(pid, seconds: 5)
        }
    }
}
