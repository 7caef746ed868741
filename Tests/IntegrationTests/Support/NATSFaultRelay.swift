import Foundation
import Glibc

@testable import KVOTestSupport

/// A TCP relay on 127.0.0.1 between one kvod node and one nats-server, for tests of what a node does when
/// the NATS copy it reads is wrong. Client→server bytes are forwarded untouched; server→client bytes are
/// parsed into protocol frames (`NATSFrameParser`) and forwarded unchanged unless a fault is armed for a
/// JetStream delivery on `subject` (the kvod log subject, `kvod.<stream>.log`):
///
/// - `renumber(after:by:)`: the stream sequence in a delivery's reply subject is rewritten (a replica whose
///   copy is numbered differently);
/// - `dropDelivery(sequence:)`: a delivery is not forwarded, later ones are numbered one lower (a copy with
///   an entry missing);
/// - `duplicateDelivery(sequence:)`: a delivery is forwarded twice, at its sequence and the next, later ones
///   numbered one higher (an entry present twice);
/// - `substitute(sequence:with:)`: a delivery's payload is replaced (another entry at that sequence);
/// - `cut()` closes the current connections; `blackhole(_:)` stops forwarding both ways, connections kept
///   open (a partition); what the server sends meanwhile is read, counted and held (`stats.held`) until it ends.
///
/// A delivery is a MSG or HMSG whose subject is `subject` (a push consumer's deliveries keep the stream
/// message's own subject; only its heartbeats and flow-control requests come on the deliver inbox) and
/// whose reply subject is a `$JS.ACK.…` one (`JetStreamAckReply`). Sequences named in faults are the
/// server's own (real) stream sequences. Faults apply to the live connections and to later ones until
/// `clear()`. The consumer sequence of the reply subject (and the `Nats-Last-Consumer` / `Nats-Last-Stream`
/// headers of the consumer's idle heartbeats) are shifted along, so that an ordered consumer sees the
/// faulty copy as a consistent one rather than a gap it would repair by re-creating itself. `stats` counts
/// what the relay did (`injected`: deliveries it altered, dropped or added).
///
/// The NATS servers behind relays must not advertise their client URLs (nats-server `--no_advertise`):
/// libnats adds advertised URLs to its pool and would, after a reconnect, bypass the relay
/// (`stats.advertisingInfos` counts INFO frames that advertise).
///
/// Threads: one accepts; each connection pair has two forwarding threads (client→server, server→client).
/// Faults, counters and the connection list are under one lock, so the test thread arms faults and reads
/// `stats` at any time. The relay owns its listener and every connection's two sockets; the threads hold
/// the shared state (not the relay), so the relay stops everything on deinit.
final class NATSFaultRelay: @unchecked Sendable {
    // @unchecked: every mutable state is in `core`, under its lock.
    /// The port the relay listens on (127.0.0.1).
    let port: Int
    /// The nats-server's client port on 127.0.0.1.
    let targetPort: Int
    private let core: Core

    /// Listens on an ephemeral port of 127.0.0.1 and relays each connection to 127.0.0.1:`targetPort`,
    /// watching deliveries on `subject`.
    init(targetPort: Int, subject: String) throws {
        self.targetPort = targetPort
        let (listener, port) = try LoopbackListener.open(backlog: 64)
        self.port = port
        core = Core(listener: listener, targetPort: targetPort, subject: subject)
        Thread.detachNewThread { [core] in core.acceptLoop() }
    }

    deinit { core.stop() }

    /// The relay's URL, as kvod's `--cluster` takes it.
    var url: String { "nats://127.0.0.1:\(port)" }

    /// Every delivery with stream sequence > `after` is forwarded as sequence + `by` (never below 0).
    /// Adds to the renumberings armed before.
    func renumber(after: UInt64, by: Int64) {
        core.withFaults { $0.renumber(after: after, by: by) }
    }

    /// The delivery with stream sequence `sequence` is not forwarded (each time it is delivered); every
    /// later one is numbered one lower.
    func dropDelivery(sequence: UInt64) {
        core.withFaults { $0.drop(sequence) }
    }

    /// The delivery with stream sequence `sequence` is forwarded, then forwarded again as the next
    /// sequence; every later one is numbered one higher.
    func duplicateDelivery(sequence: UInt64) {
        core.withFaults { $0.duplicate(sequence) }
    }

    /// The delivery with stream sequence `sequence` is forwarded with `payload` instead of its own.
    func substitute(sequence: UInt64, with payload: [UInt8]) {
        core.withFaults { $0.substitute(sequence, with: payload) }
    }

    /// Disarms every fault and ends a blackhole: from now on frames go through unchanged (consumer
    /// sequences too, so an ordered consumer that saw a drop or duplicate sees a jump and re-creates itself).
    func clear() {
        core.withFaults { $0.clear() }
        core.setBlackholed(false)
    }

    /// Closes every current connection (both sides); later connections are relayed.
    func cut() {
        core.cutAll()
    }

    /// `true`: stops forwarding both ways on every connection, current and later, keeping them open (the
    /// client's bytes are left unread; the server's are read, counted and held, `stats.held`: none is lost
    /// unless the connection is cut); `false`: forwards again.
    func blackhole(_ on: Bool) {
        core.setBlackholed(on)
    }

    /// What the relay did so far.
    var stats: Stats {
        core.withFaults { $0.stats }
    }

    /// Deliveries altered, dropped or added so far (`stats.injected`).
    var injected: Int { stats.injected }

    /// Counters of a relay, all since it started (`clear` keeps them).
    struct Stats: Sendable, CustomStringConvertible {
        /// Connections accepted and relayed.
        var connections = 0
        /// JetStream deliveries on the watched subject seen from the server.
        var deliveries = 0
        /// Deliveries altered, dropped or added by a fault.
        var injected = 0
        /// Deliveries forwarded with another stream sequence than the server's.
        var renumbered = 0
        var dropped = 0
        /// Extra copies forwarded.
        var duplicated = 0
        var substituted = 0
        /// Idle heartbeats whose `Nats-Last-Consumer` / `Nats-Last-Stream` headers were shifted along.
        var heartbeatsRewritten = 0
        /// INFO frames advertising other servers' URLs (`connect_urls`): a client may bypass the relay.
        var advertisingInfos = 0
        /// Frames read from the server during a blackhole and not forwarded yet (they are once it ends; a
        /// cut drops them).
        var held = 0
        /// Server→client streams that did not parse (forwarded raw from there on), with why.
        var parseFailures: [String] = []
        /// The server's stream sequence of the last delivery seen, and the one it was last forwarded as.
        var lastStreamSequence: UInt64?
        var lastForwardedSequence: UInt64?

        var description: String {
            "connections \(connections), deliveries \(deliveries), injected \(injected) (renumbered \(renumbered), dropped \(dropped), "
                + "duplicated \(duplicated), substituted \(substituted)), heartbeats rewritten \(heartbeatsRewritten), held \(held), "
                + "advertising INFOs \(advertisingInfos), last \(lastStreamSequence.map(String.init) ?? "-") forwarded as "
                + "\(lastForwardedSequence.map(String.init) ?? "-"), parse failures \(parseFailures)"
        }
    }

    /// One relayed connection: the client's socket and the server's. Its fields are under the core's lock;
    /// the last of its two threads to finish closes both sockets.
    private final class Pair: @unchecked Sendable {
        // @unchecked: `closing` and `running` are only touched under the core's lock.
        let client: Int32
        let server: Int32
        var closing = false
        var running = 2

        init(client: Int32, server: Int32) {
            self.client = client
            self.server = server
        }
    }

    /// What the relay's threads share: the listener, the pairs, the faults and the blackhole, under `lock`.
    private final class Core: @unchecked Sendable {
        // @unchecked: the mutable fields below are only touched under `lock`.
        private let listener: Int32
        private let targetPort: Int
        private let lock = NSLock()
        private var faults: NATSDeliveryFaults
        private var pairs: [Pair] = []
        private var blackholed = false
        private var stopped = false
        private var listenerClosed = false

        init(listener: Int32, targetPort: Int, subject: String) {
            self.listener = listener
            self.targetPort = targetPort
            faults = NATSDeliveryFaults(subject: subject)
        }

        func withFaults<T>(_ body: (inout NATSDeliveryFaults) -> T) -> T {
            lock.lock()
            defer { lock.unlock() }
            return body(&faults)
        }

        func setBlackholed(_ on: Bool) {
            lock.lock()
            blackholed = on
            lock.unlock()
        }

        /// Shuts every pair's sockets down (their threads then finish and close them). Under the lock, so
        /// a socket is never shut down after its last thread closed it.
        func cutAll() {
            lock.lock()
            for pair in pairs { Core.shutDown(pair) }
            lock.unlock()
        }

        /// Ends the accept thread and every pair.
        func stop() {
            lock.lock()
            stopped = true
            for pair in pairs { Core.shutDown(pair) }
            // Wakes accept(2), which then fails; the accept thread closes the listener (under the lock too,
            // so it is never shut down once closed).
            if !listenerClosed { shutdown(listener, Int32(SHUT_RDWR)) }
            lock.unlock()
        }

        private static func shutDown(_ pair: Pair) {
            shutdown(pair.client, Int32(SHUT_RDWR))
            shutdown(pair.server, Int32(SHUT_RDWR))
        }

        private var isStopped: Bool {
            lock.lock()
            defer { lock.unlock() }
            return stopped
        }

        /// The accept thread.
        func acceptLoop() {
            defer {
                lock.lock()
                listenerClosed = true
                close(listener)
                lock.unlock()
            }
            while true {
                let client = accept(listener, nil, nil)
                if client < 0 {
                    if isStopped { return }
                    if errno == EINTR || errno == ECONNABORTED { continue }
                    usleep(10_000)
                    continue
                }
                guard let server = Core.connectUpstream(port: targetPort) else {
                    // As a server that is down: the client sees its connection closed at once.
                    close(client)
                    continue
                }
                Core.setNoDelay(client)
                let pair = Pair(client: client, server: server)
                lock.lock()
                let isStopped = stopped
                if !isStopped {
                    pairs.append(pair)
                    faults.stats.connections += 1
                }
                lock.unlock()
                if isStopped {
                    close(client)
                    close(server)
                    return
                }
                Thread.detachNewThread { [self] in clientToServer(pair) }
                Thread.detachNewThread { [self] in serverToClient(pair) }
            }
        }

        /// Waits while the relay is blackholed; false once the pair is closing or the relay stopped.
        private func waitForPassage(_ pair: Pair) -> Bool {
            while true {
                lock.lock()
                let closing = pair.closing || stopped
                let passes = !blackholed
                lock.unlock()
                if closing { return false }
                if passes { return true }
                usleep(20_000)
            }
        }

        /// Whether bytes may be forwarded now (false during a blackhole); nil once the pair is closing or the
        /// relay stopped.
        private func passage(_ pair: Pair) -> Bool? {
            lock.lock()
            defer { lock.unlock() }
            if pair.closing || stopped { return nil }
            return !blackholed
        }

        /// A forwarding thread: client→server, bytes untouched.
        private func clientToServer(_ pair: Pair) {
            var buffer = [UInt8](repeating: 0, count: 65536)
            while waitForPassage(pair) {
                let count = recv(pair.client, &buffer, buffer.count, 0)
                // Bytes read just as a blackhole began wait for its end (none is lost).
                guard count > 0, waitForPassage(pair), Core.sendAll(pair.server, buffer[0..<count]) else { break }
            }
            finish(pair)
        }

        /// A forwarding thread: server→client, frame by frame through the faults. It goes on reading during a
        /// blackhole: what it reads is parsed and counted (`stats.deliveries`, `stats.held`) and held until the
        /// blackhole ends, so that a test can see a delivery reach the relay and not the node.
        private func serverToClient(_ pair: Pair) {
            var buffer = [UInt8](repeating: 0, count: 65536)
            var parser = NATSFrameParser()
            var connection = NATSDeliveryFaults.Connection()
            var raw = false
            // Read but not forwarded yet (during a blackhole), and how many frames of it `stats.held` counts.
            var pending: [UInt8] = []
            var pendingFrames = 0
            var countedHeld = 0
            while let passes = passage(pair) {
                if passes, !pending.isEmpty {
                    guard Core.sendAll(pair.client, pending[...]) else { break }
                    pending.removeAll(keepingCapacity: true)
                    lock.lock()
                    faults.stats.held -= countedHeld
                    lock.unlock()
                    (pendingFrames, countedHeld) = (0, 0)
                }
                // Held bytes wait for the blackhole's end: the poll wakes to look again.
                var entry = pollfd(fd: pair.server, events: Int16(POLLIN), revents: 0)
                let ready = poll(&entry, 1, pending.isEmpty ? -1 : 20)
                if ready < 0, errno == EINTR { continue }
                guard ready >= 0 else { break }
                if ready == 0 { continue }
                let count = recv(pair.server, &buffer, buffer.count, 0)
                guard count > 0 else { break }
                if raw {
                    pending += buffer[0..<count]
                    continue
                }
                parser.append(buffer[0..<count])
                var frames: [NATSFrame] = []
                var failure: String?
                do {
                    while let frame = try parser.next() { frames.append(frame) }
                } catch {
                    failure = "\(error)"
                }
                lock.lock()
                for frame in frames {
                    for forwarded in faults.process(frame, on: &connection) {
                        pending += forwarded.bytes
                        pendingFrames += 1
                    }
                }
                if let failure { faults.stats.parseFailures.append(failure) }
                if blackholed {
                    faults.stats.held += pendingFrames - countedHeld
                    countedHeld = pendingFrames
                }
                lock.unlock()
                if failure != nil {
                    // Forward the rest as it comes, unparsed: the client decides what it makes of it.
                    pending += parser.takeRemainder()
                    raw = true
                }
            }
            lock.lock()
            faults.stats.held -= countedHeld
            lock.unlock()
            finish(pair)
        }

        /// A forwarding thread ends: shuts both sockets down (the other thread then ends too); the last
        /// one closes them.
        private func finish(_ pair: Pair) {
            lock.lock()
            pair.closing = true
            Core.shutDown(pair)
            pair.running -= 1
            let last = pair.running == 0
            if last { pairs.removeAll { $0 === pair } }
            lock.unlock()
            if last {
                close(pair.client)
                close(pair.server)
            }
        }

        private static func sendAll(_ descriptor: Int32, _ bytes: ArraySlice<UInt8>) -> Bool {
            bytes.withUnsafeBytes { buffer in
                var sent = 0
                while sent < buffer.count {
                    let result = send(descriptor, buffer.baseAddress! + sent, buffer.count - sent, Int32(MSG_NOSIGNAL))
                    if result < 0, errno == EINTR { continue }
                    if result <= 0 { return false }
                    sent += result
                }
                return true
            }
        }

        /// Both ends send small frames and wait for answers (PING/PONG, requests): without TCP_NODELAY the
        /// relay's writes would meet Nagle's algorithm and delayed ACKs (40 ms stalls) that libnats and
        /// nats-server avoid on their own sockets.
        private static func setNoDelay(_ descriptor: Int32) {
            var one: Int32 = 1
            setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        }

        /// A socket connected to 127.0.0.1:`port`; nil when nothing listens there.
        private static func connectUpstream(port: Int) -> Int32? {
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard descriptor >= 0 else { return nil }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = UInt16(port).bigEndian
            let status = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard status == 0 else {
                close(descriptor)
                return nil
            }
            setNoDelay(descriptor)
            return descriptor
        }
    }
}

/// The faults a `NATSFaultRelay` has armed and what it did: a value, kept by the relay under its lock.
/// `process` is its whole logic (pure, so the unit tests call it directly).
struct NATSDeliveryFaults {
    /// The subject whose JetStream deliveries are faulted (the kvod log subject).
    let subject: String
    private(set) var renumberings: [(after: UInt64, by: Int64)] = []
    private(set) var drops: Set<UInt64> = []
    private(set) var duplicates: Set<UInt64> = []
    private(set) var substitutions: [UInt64: [UInt8]] = [:]
    var stats = NATSFaultRelay.Stats()
    /// By consumer name: how far its consumer sequences are shifted (one lower per drop, one higher per
    /// duplicate so far), so that it sees no gap.
    private var consumerShifts: [String: Int64] = [:]

    init(subject: String) {
        self.subject = subject
    }

    /// What one server→client connection learned: which consumer each subscription id's deliveries
    /// come from (the heartbeats on that id carry no consumer name). Owned by that connection's thread.
    struct Connection {
        var consumers: [String: String] = [:]
    }

    /// See `NATSFaultRelay.renumber(after:by:)`, `dropDelivery`, `duplicateDelivery`, `substitute`.
    mutating func renumber(after: UInt64, by: Int64) { renumberings.append((after, by)) }
    mutating func drop(_ sequence: UInt64) { drops.insert(sequence) }
    mutating func duplicate(_ sequence: UInt64) { duplicates.insert(sequence) }
    mutating func substitute(_ sequence: UInt64, with payload: [UInt8]) { substitutions[sequence] = payload }

    /// Disarms every fault (the counters stay).
    mutating func clear() {
        renumberings = []
        drops = []
        duplicates = []
        substitutions = [:]
        consumerShifts = [:]
    }

    /// The stream sequence a delivery of server sequence `sequence` is forwarded as (not for a dropped one).
    func forwardedSequence(of sequence: UInt64) -> UInt64 {
        var shift: Int64 = 0
        for rule in renumberings where sequence > rule.after { shift = NATSDeliveryFaults.add(shift, rule.by) }
        for duplicate in duplicates where duplicate < sequence { shift = NATSDeliveryFaults.add(shift, 1) }
        for drop in drops where drop < sequence { shift = NATSDeliveryFaults.add(shift, -1) }
        return NATSDeliveryFaults.shifted(sequence, by: shift)
    }

    /// The sequence the last delivery forwarded has when the server's last delivered was `sequence`
    /// (for `Nats-Last-Stream`): the one before a dropped one, the second copy of a duplicated one.
    func forwardedLast(of sequence: UInt64) -> UInt64 {
        var last = sequence
        while last > 0, drops.contains(last) { last -= 1 }
        if last == 0 { return 0 }
        let forwarded = forwardedSequence(of: last)
        return duplicates.contains(last) ? forwarded + 1 : forwarded
    }

    /// The frames to forward for `frame` from the server: itself unless it is a delivery on `subject`
    /// that a fault concerns, or a heartbeat of a consumer whose sequences are shifted.
    mutating func process(_ frame: NATSFrame, on connection: inout Connection) -> [NATSFrame] {
        switch frame.kind {
        case .info:
            if String(decoding: frame.bytes, as: UTF8.self).contains("\"connect_urls\"") {
                stats.advertisingInfos += 1
            }
            return [frame]
        case .msg, .hmsg:
            break
        default:
            return [frame]
        }
        if frame.subject == subject, let reply = frame.reply, let ack = JetStreamAckReply(reply) {
            return processDelivery(frame, ack, on: &connection)
        }
        if frame.kind == .hmsg, let consumer = connection.consumers[frame.sid], let headers = frame.headers {
            return [rewriteHeartbeat(frame, headers: headers, consumer: consumer)]
        }
        return [frame]
    }

    private mutating func processDelivery(_ frame: NATSFrame, _ ack: JetStreamAckReply, on connection: inout Connection) -> [NATSFrame] {
        stats.deliveries += 1
        connection.consumers[frame.sid] = ack.consumer
        let sequence = ack.streamSequence
        let shift = consumerShifts[ack.consumer] ?? 0
        stats.lastStreamSequence = sequence
        if drops.contains(sequence) {
            consumerShifts[ack.consumer] = shift - 1
            stats.dropped += 1
            stats.injected += 1
            return []
        }
        let forwarded = forwardedSequence(of: sequence)
        let consumerSequence = NATSDeliveryFaults.shifted(ack.consumerSequence, by: shift)
        var payload = frame.payload
        var altered = false
        if let replacement = substitutions[sequence] {
            payload = replacement
            stats.substituted += 1
            altered = true
        }
        if forwarded != sequence {
            stats.renumbered += 1
            altered = true
        }
        altered = altered || consumerSequence != ack.consumerSequence
        var result = [altered ? frame.with(reply: ack.reply(stream: forwarded, consumer: consumerSequence), payload: payload) : frame]
        if altered { stats.injected += 1 }
        stats.lastForwardedSequence = forwarded
        if duplicates.contains(sequence) {
            consumerShifts[ack.consumer] = shift + 1
            result.append(frame.with(reply: ack.reply(stream: forwarded + 1, consumer: consumerSequence + 1), payload: payload))
            stats.duplicated += 1
            stats.injected += 1
            stats.lastForwardedSequence = forwarded + 1
        }
        return result
    }

    /// An idle heartbeat (`NATS/1.0 100 Idle Heartbeat`, its `Nats-Last-Consumer` and `Nats-Last-Stream`)
    /// with both sequences as the consumer saw them; unchanged when no fault shifts them.
    private mutating func rewriteHeartbeat(_ frame: NATSFrame, headers: [UInt8], consumer: String) -> NATSFrame {
        let shift = consumerShifts[consumer] ?? 0
        var lines = String(decoding: headers, as: UTF8.self).components(separatedBy: "\r\n")
        var changed = false
        for index in lines.indices.dropFirst() {
            guard let colon = lines[index].firstIndex(of: ":") else { continue }
            let name = lines[index][..<colon].trimmingCharacters(in: .whitespaces).lowercased()
            guard let value = UInt64(lines[index][lines[index].index(after: colon)...].trimmingCharacters(in: .whitespaces)) else { continue }
            let rewritten: UInt64
            switch name {
            case "nats-last-consumer": rewritten = NATSDeliveryFaults.shifted(value, by: shift)
            case "nats-last-stream": rewritten = forwardedLast(of: value)
            default: continue
            }
            if rewritten != value {
                lines[index] = "\(lines[index][..<colon]): \(rewritten)"
                changed = true
            }
        }
        guard changed else { return frame }
        stats.heartbeatsRewritten += 1
        return frame.with(headers: Array(lines.joined(separator: "\r\n").utf8))
    }

    private static func add(_ a: Int64, _ b: Int64) -> Int64 {
        let (sum, overflow) = a.addingReportingOverflow(b)
        return overflow ? (b > 0 ? .max : .min) : sum
    }

    /// `value` + `shift`, never below 0.
    static func shifted(_ value: UInt64, by shift: Int64) -> UInt64 {
        if shift >= 0 {
            let (sum, overflow) = value.addingReportingOverflow(UInt64(shift))
            return overflow ? .max : sum
        }
        let down = shift.magnitude
        return value > down ? value - down : 0
    }
}
