import Foundation
import KVOJSON
import KVOWireProbe
import Testing

@testable import KVOTestSupport

/// `NATSFaultRelay` in front of one node of a real cluster (`LocalCluster(relayedNode:)`): with nothing
/// armed the node's NATS traffic goes through unchanged (writes on every node converge to equal digests);
/// blackholed, the node gets nothing until the relays forward again; cut, it reconnects through a relay
/// (the NATS servers advertise no URL around it); with a renumbering armed its deliveries reach it
/// numbered one lower, and it no longer reports the others' applied sequence. What the node should do
/// about a renumbered copy is not asserted here. In the `cluster` suite so that it never runs beside
/// another cluster.
extension ClusterTests {
    /// Node `index`'s `applied` stream sequence; nil when it does not answer.
    private func applied(_ cluster: LocalCluster, _ index: Int) -> Int64? {
        (try? cluster.connect(index).call("digest"))?["applied"]?.intValue
    }

    /// Waits up to `timeout` seconds until `condition` holds; whether it did.
    private func waitUntil(timeout: Double, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while !condition() {
            if Date() >= deadline { return false }
            usleep(50_000)
        }
        return true
    }

    @Test("NATSFaultRelay in front of n2: pass-through converges; blackhole holds n2 back; cut reconnects through a relay; a renumbering fires and moves n2 off the others' applied sequence")
    func nodeBehindNATSFaultRelays() throws {
        let cluster = try LocalCluster(label: "relay", relayedNode: 1)
        try cluster.waitUntilReady()
        let clients = try cluster.nodes.indices.map { try cluster.connect($0) }
        for (index, client) in clients.enumerated() {
            try client.call("create", ["object": .string("w\(index)"), "values": ["n": 0]])
        }
        for value in 1...5 {
            for (index, client) in clients.enumerated() {
                try client.call("set", ["object": .string("w\(index)"), "keyPath": "n", "value": .int(Int64(value))])
            }
        }
        var digests = try cluster.waitForConvergence()
        expectEqual(Set(digests.map { $0["digest"]?.stringValue ?? "" }).count, 1, "\(digests)")
        var applied = try #require(digests[0]["applied"]?.intValue)
        let passed = cluster.relays.map(\.stats)
        // n2 read every entry through a relay (not around it), and nothing was altered.
        #expect(Int64(passed.map(\.deliveries).reduce(0, +)) >= applied, "\(passed)")
        #expect(passed.allSatisfy { $0.injected == 0 && $0.advertisingInfos == 0 && $0.parseFailures.isEmpty }, "\(passed)")

        // A partition: n1 and n3 apply a write, n2 does not until the relays forward again.
        // The write's delivery reaching n2's relay, which holds it, is the marker: no waiting out a time.
        let seen = cluster.relays.map(\.stats.deliveries).reduce(0, +)
        for relay in cluster.relays { relay.blackhole(true) }
        try clients[0].call("set", ["object": "w0", "keyPath": "n", "value": 50])
        #expect(waitUntil(timeout: 10) { [0, 2].allSatisfy { self.applied(cluster, $0) == applied + 1 } }, "\(cluster.diagnostics())")
        #expect(waitUntil(timeout: 10) { cluster.relays.map(\.stats.deliveries).reduce(0, +) > seen }, "\(cluster.relays.map(\.stats))")
        #expect(cluster.relays.map(\.stats.held).reduce(0, +) > 0, "\(cluster.relays.map(\.stats))")
        expectEqual(self.applied(cluster, 1), applied, "n2 applied a write while blackholed")
        for relay in cluster.relays { relay.blackhole(false) }
        digests = try cluster.waitForConvergence()
        applied = try #require(digests[0]["applied"]?.intValue)

        // Cut: n2 reconnects, through a relay, and goes on applying.
        let connections = cluster.relays.map(\.stats.connections).reduce(0, +)
        for relay in cluster.relays { relay.cut() }
        #expect(waitUntil(timeout: 10) { cluster.relays.map(\.stats.connections).reduce(0, +) > connections }, "\(cluster.diagnostics())")
        try clients[2].call("set", ["object": "w2", "keyPath": "n", "value": 60])
        digests = try cluster.waitForConvergence()
        expectEqual(Set(digests.map { $0["digest"]?.stringValue ?? "" }).count, 1, "\(digests)")
        applied = try #require(digests[0]["applied"]?.intValue)
        #expect(cluster.relays.allSatisfy { $0.injected == 0 && $0.stats.advertisingInfos == 0 }, "\(cluster.relays.map(\.stats))")

        // A copy numbered one lower from the next entry on (as one nats-server's copy was in production).
        for relay in cluster.relays { relay.renumber(after: UInt64(applied), by: -1) }
        for value in 1...3 {
            try clients[0].call("set", ["object": "w0", "keyPath": "n", "value": .int(Int64(100 + value))])
        }
        let expected = applied + 3
        #expect(waitUntil(timeout: 15) { [0, 2].allSatisfy { self.applied(cluster, $0) == expected } }, "\(cluster.diagnostics())")
        // The three entries went through a relay, each renumbered.
        #expect(waitUntil(timeout: 10) { cluster.relays.map(\.injected).reduce(0, +) >= 3 }, "\(cluster.relays.map(\.stats))")
        let armed = cluster.relays.map(\.stats)
        #expect(armed.contains { $0.lastStreamSequence == UInt64(expected) && $0.lastForwardedSequence == UInt64(expected - 1) }, "\(armed)")
        // Whatever n2 makes of it, it does not report the others' applied sequence (a stopped node reports none).
        let relayedApplied = self.applied(cluster, 1)
        print("NATSFaultRelay: n2 applied \(relayedApplied.map(String.init) ?? "none"), n1 and n3 \(expected); relays: \(armed)")
        #expect(relayedApplied != expected, "n2 applied \(relayedApplied.map(String.init) ?? "none"), the others \(expected)")
    }
}

/// `NATSFaultRelay`'s parts without a network: the frame parser, fed a server's byte stream split at every
/// byte boundary, and the faults applied to hand-made JetStream deliveries.
@Suite("NATS fault relay frames")
struct NATSFaultRelayFrameTests {
    private static let subject = "kvod.s.log"

    /// A delivery of stream sequence `sequence`, consumer sequence `consumer`, as nats-server writes it
    /// (HMSG, since kvod publishes with a message id header).
    private static func delivery(_ sequence: UInt64, consumer: UInt64, sid: String = "1", payload: String = "entry",
                                 consumerName: String = "c1") -> NATSFrame {
        NATSFrame(subject: subject, sid: sid, reply: "$JS.ACK.s.\(consumerName).1.\(sequence).\(consumer).1700000000000000000.0",
                  headers: Array("NATS/1.0\r\nNats-Msg-Id: n1-\(sequence)\r\n\r\n".utf8), payload: Array(payload.utf8))
    }

    /// Every frame kind a server sends, byte for byte, with awkward payloads (CRLF and `MSG` inside, empty).
    private static let serverStream: [(NATSFrame.Kind, String)] = [
        (.info, "INFO {\"server_id\":\"NABC\",\"version\":\"2.15.1\",\"headers\":true,\"max_payload\":1048576}\r\n"),
        (.ping, "PING\r\n"),
        (.pong, "PONG\r\n"),
        (.ok, "+OK\r\n"),
        (.err, "-ERR 'Unknown Protocol Operation'\r\n"),
        (.msg, "MSG kvod.s.log 1 $JS.ACK.s.c1.1.5.5.1700000000000000000.0 15\r\nab\r\nMSG x 1 2\r\n\r\n"),
        (.msg, "MSG _INBOX.a 22 0\r\n\r\n"),
        (.msg, "msg\t_INBOX.b\t7\t\t2\r\nhi\r\n"),
        (.hmsg, "HMSG kvod.s.log 1 $JS.ACK.s.c1.1.6.6.1700000000000000000.0 29 34\r\nNATS/1.0\r\nNats-Msg-Id: b1\r\n\r\nabcde\r\n"),
        (.hmsg, "HMSG _INBOX.c 1 75 75\r\nNATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 6\r\nNats-Last-Stream: 6\r\n\r\n\r\n"),
        (.hmsg, "HMSG _INBOX.c 1 $JS.FC.s.abc.1 36 36\r\nNATS/1.0 100 FlowControl Request\r\n\r\n\r\n"),
        (.unknown, "\r\n"),
    ]

    private static func parseAll(_ chunks: [ArraySlice<UInt8>]) throws -> [NATSFrame] {
        var parser = NATSFrameParser()
        var frames: [NATSFrame] = []
        for chunk in chunks {
            parser.append(chunk)
            while let frame = try parser.next() { frames.append(frame) }
        }
        expectEqual(parser.bufferedCount, 0)
        return frames
    }

    @Test("NATSFaultRelay's frame parser: the same frames however the stream is split, at every byte boundary or byte by byte")
    func framesSplitAtEveryByte() throws {
        let bytes = Array(NATSFaultRelayFrameTests.serverStream.map { $0.1 }.joined().utf8)
        let whole = try NATSFaultRelayFrameTests.parseAll([bytes[...]])
        expectEqual(whole.map(\.kind), NATSFaultRelayFrameTests.serverStream.map { $0.0 })
        expectEqual(whole.map { String(decoding: $0.bytes, as: UTF8.self) }, NATSFaultRelayFrameTests.serverStream.map { $0.1 })
        expectEqual(whole[5].payload, Array("ab\r\nMSG x 1 2\r\n".utf8))
        expectEqual(whole[5].reply, "$JS.ACK.s.c1.1.5.5.1700000000000000000.0")
        #expect(whole[6].payload.isEmpty && whole[6].reply == nil && whole[6].sid == "22")
        #expect(whole[7].subject == "_INBOX.b" && whole[7].sid == "7" && whole[7].payload == Array("hi".utf8))
        #expect(whole[8].headers == Array("NATS/1.0\r\nNats-Msg-Id: b1\r\n\r\n".utf8) && whole[8].payload == Array("abcde".utf8))
        #expect(whole[9].headers?.count == 75 && whole[9].payload.isEmpty && whole[9].reply == nil)
        expectEqual(whole[10].reply, "$JS.FC.s.abc.1")
        for split in 0...bytes.count {
            let frames = try NATSFaultRelayFrameTests.parseAll([bytes[..<split], bytes[split...]])
            expectEqual(frames, whole, "split at byte \(split)")
        }
        let byteByByte = try NATSFaultRelayFrameTests.parseAll(bytes.indices.map { bytes[$0...$0] })
        expectEqual(byteByByte, whole)
    }

    @Test("NATSFaultRelay's frame parser: a message line with wrong arguments or without CRLF after its payload throws")
    func malformedFrames() throws {
        for text in ["MSG foo 1\r\n", "HMSG foo 1 2\r\n", "MSG foo 1 x\r\n", "HMSG foo 1 9 3\r\n", "MSG foo 1 3\r\nabcXY"] {
            var parser = NATSFrameParser()
            parser.append(Array(text.utf8))
            #expect(throws: NATSFrameError.self, "\(text.debugDescription)") { _ = try parser.next() }
        }
        var parser = NATSFrameParser()
        parser.append(Array("MSG foo 1 3\r\nabc\r".utf8))
        expectEqual(try parser.next(), nil, "an incomplete message is not a frame yet")
    }

    /// The deliveries `faults` forwards for deliveries 1…`count` (consumer sequences 1…), re-parsed from
    /// the bytes it forwards: (stream sequence, consumer sequence, payload).
    private static func forward(_ count: UInt64, through faults: inout NATSDeliveryFaults) throws -> [(UInt64, UInt64, String)] {
        var connection = NATSDeliveryFaults.Connection()
        var bytes: [UInt8] = []
        for sequence in 1...count {
            for frame in faults.process(delivery(sequence, consumer: sequence, payload: "e\(sequence)"), on: &connection) {
                bytes += frame.bytes
            }
        }
        return try parseAll([bytes[...]]).map { frame in
            let reply = try #require(frame.reply)
            let ack = try #require(JetStreamAckReply(reply))
            return (ack.streamSequence, ack.consumerSequence, String(decoding: frame.payload, as: UTF8.self))
        }
    }

    @Test("NATSFaultRelay's faults: renumber, drop, duplicate, substitute; consumer sequences stay gapless; byte counts match")
    func faultsOnDeliveries() throws {
        var faults = NATSDeliveryFaults(subject: NATSFaultRelayFrameTests.subject)
        var plain = try NATSFaultRelayFrameTests.forward(4, through: &faults)
        #expect(plain.map { $0.0 } == [1, 2, 3, 4] && plain.map { $0.1 } == [1, 2, 3, 4] && faults.stats.injected == 0)

        faults.renumber(after: 2, by: -1)
        plain = try NATSFaultRelayFrameTests.forward(4, through: &faults)
        #expect(plain.map { $0.0 } == [1, 2, 2, 3] && plain.map { $0.1 } == [1, 2, 3, 4] && plain.map { $0.2 } == ["e1", "e2", "e3", "e4"])
        #expect(faults.stats.injected == 2 && faults.stats.renumbered == 2)

        faults.clear()
        faults.drop(2)
        var dropped = try NATSFaultRelayFrameTests.forward(4, through: &faults)
        #expect(dropped.map { $0.0 } == [1, 2, 3] && dropped.map { $0.1 } == [1, 2, 3] && dropped.map { $0.2 } == ["e1", "e3", "e4"])
        expectEqual(faults.stats.dropped, 1)

        faults.clear()
        faults.duplicate(2)
        dropped = try NATSFaultRelayFrameTests.forward(4, through: &faults)
        #expect(dropped.map { $0.0 } == [1, 2, 3, 4, 5] && dropped.map { $0.1 } == [1, 2, 3, 4, 5])
        #expect(dropped.map { $0.2 } == ["e1", "e2", "e2", "e3", "e4"] && faults.stats.duplicated == 1)

        faults.clear()
        faults.substitute(3, with: Array("another entry, longer".utf8))
        let substituted = try NATSFaultRelayFrameTests.forward(4, through: &faults)
        #expect(substituted.map { $0.2 } == ["e1", "e2", "another entry, longer", "e4"] && substituted.map { $0.0 } == [1, 2, 3, 4])
        expectEqual(faults.stats.substituted, 1)
    }

    @Test("NATSFaultRelay's faults: a heartbeat's last sequences follow the consumer's; the long reply form; other subjects untouched")
    func heartbeatsAndReplyForms() throws {
        var faults = NATSDeliveryFaults(subject: NATSFaultRelayFrameTests.subject)
        faults.drop(2)
        faults.renumber(after: 0, by: 10)
        var connection = NATSDeliveryFaults.Connection()
        for sequence in UInt64(1)...3 { _ = faults.process(NATSFaultRelayFrameTests.delivery(sequence, consumer: sequence, sid: "9"), on: &connection) }
        let heartbeat = NATSFrame(subject: "_INBOX.x", sid: "9", reply: nil,
                                  headers: Array("NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 3\r\nNats-Last-Stream: 3\r\n\r\n".utf8), payload: [])
        let rewritten = faults.process(heartbeat, on: &connection)
        expectEqual(rewritten.count, 1)
        expectEqual(rewritten.first?.headers, Array("NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 2\r\nNats-Last-Stream: 12\r\n\r\n".utf8))
        let reparsed = try NATSFaultRelayFrameTests.parseAll([(rewritten.first?.bytes ?? [])[...]])
        expectEqual(reparsed, rewritten, "the rewritten heartbeat's byte counts match its bytes")
        expectEqual(faults.stats.heartbeatsRewritten, 1)
        // Another subscription's heartbeat, and a message on another subject, go through as they were.
        let other = NATSFrame(subject: "_INBOX.y", sid: "4", reply: nil, headers: heartbeat.headers, payload: [])
        expectEqual(faults.process(other, on: &connection), [other])
        let unrelated = NATSFrame(subject: "kvod.s.snap", sid: "9", reply: "$JS.ACK.s_SNAP.c2.1.3.3.1700000000000000000.0", headers: nil, payload: [1])
        expectEqual(faults.process(unrelated, on: &connection), [unrelated])

        // The long form: $JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>.<random>.
        let long = try #require(JetStreamAckReply("$JS.ACK._.HASH.s.c1.1.41.7.1700000000000000000.0.XyZ"))
        #expect(long.stream == "s" && long.consumer == "c1" && long.streamSequence == 41 && long.consumerSequence == 7)
        expectEqual(long.reply(stream: 40, consumer: 8), "$JS.ACK._.HASH.s.c1.1.40.8.1700000000000000000.0.XyZ")
        #expect(JetStreamAckReply("$JS.ACK.s.c1.1.41.7.1700000000000000000") == nil, "8 tokens is no delivery's")
        #expect(JetStreamAckReply("$JS.FC.s.abc.1") == nil)
    }
}

/// `NATSFaultRelay`'s sockets, between a `KVOConnection` playing the client and a listener playing the
/// NATS server: the client's bytes arrive untouched, a delivery sent in two pieces arrives renumbered,
/// a blackhole holds bytes back until it ends, `cut` closes both sides, and the relay's deinit closes its
/// connections and its port.
@Suite("NATS fault relay sockets")
struct NATSFaultRelaySocketTests {
    /// The next connection on `listener` within 5 s; nil when none comes.
    private static func accept(_ listener: Int32) -> Int32? {
        var entry = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
        guard poll(&entry, 1, 5000) == 1 else { return nil }
        let descriptor = Glibc.accept(listener, nil, nil)
        return descriptor >= 0 ? descriptor : nil
    }

    /// Up to `count` bytes from `descriptor`, fewer when it closes or 5 s pass.
    private static func receive(_ descriptor: Int32, count: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        let deadline = Date().addingTimeInterval(5)
        while bytes.count < count, Date() < deadline {
            var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 100) >= 0 else { break }
            if entry.revents == 0 { continue }
            let received = recv(descriptor, &chunk, min(chunk.count, count - bytes.count), 0)
            if received <= 0 { break }
            bytes += chunk[0..<received]
        }
        return bytes
    }

    private static func send(_ descriptor: Int32, _ bytes: some Collection<UInt8>) {
        let array = Array(bytes)
        var sent = 0
        while sent < array.count {
            let result = array.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress! + sent, array.count - sent, Int32(MSG_NOSIGNAL)) }
            if result <= 0 { return }
            sent += result
        }
    }

    private static func line(_ connection: KVOConnection, timeout: Double = 5) throws -> String {
        String(decoding: try connection.readLine(timeout: timeout), as: UTF8.self)
    }

    @Test("NATSFaultRelay's sockets: client bytes untouched, a split delivery renumbered, blackhole holds, cut and deinit close")
    func relaySockets() throws {
        let (listener, serverPort) = try LoopbackListener.open(backlog: 8)
        defer { close(listener) }
        var relay: NATSFaultRelay? = try NATSFaultRelay(targetPort: serverPort, subject: "kvod.s.log")
        let relayPort = try #require(relay?.port)
        let client = try KVOConnection(port: relayPort)
        defer { client.close() }
        let upstream = try #require(NATSFaultRelaySocketTests.accept(listener))
        defer { close(upstream) }

        let fromClient = Array("CONNECT {\"verbose\":false}\r\nHPUB kvod.s.log 12 17\r\nNATS/1.0\r\n\r\nhello\r\nPING\r\n".utf8)
        try client.send(raw: fromClient)
        expectEqual(NATSFaultRelaySocketTests.receive(upstream, count: fromClient.count), fromClient)

        relay?.renumber(after: 2, by: 5)
        let headers = Array("NATS/1.0\r\nNats-Msg-Id: a\r\n\r\n".utf8)
        let delivery = NATSFrame(subject: "kvod.s.log", sid: "1", reply: "$JS.ACK.s.c.1.3.3.1700000000000000000.0",
                                 headers: headers, payload: Array("entry".utf8))
        let stream = Array("INFO {\"headers\":true}\r\n".utf8) + delivery.bytes
        // In two pieces, cut inside the payload: the relay waits for the rest of the frame.
        // The INFO frame coming through shows the relay read the first piece before the second is sent.
        NATSFaultRelaySocketTests.send(upstream, stream[..<(stream.count - 4)])
        expectEqual(try NATSFaultRelaySocketTests.line(client), "INFO {\"headers\":true}")
        NATSFaultRelaySocketTests.send(upstream, stream[(stream.count - 4)...])
        expectEqual(try NATSFaultRelaySocketTests.line(client), "HMSG kvod.s.log 1 $JS.ACK.s.c.1.8.3.1700000000000000000.0 \(headers.count) \(headers.count + 5)")
        for expected in ["NATS/1.0", "Nats-Msg-Id: a", "", "entry"] {
            expectEqual(try NATSFaultRelaySocketTests.line(client), expected)
        }
        #expect(relay?.stats.injected == 1 && relay?.stats.renumbered == 1)

        // Blackholed, the relay reads the PING and holds it: once it counts it held, the client has nothing.
        relay?.blackhole(true)
        NATSFaultRelaySocketTests.send(upstream, Array("PING\r\n".utf8))
        let heldBy = Date().addingTimeInterval(5)
        while relay?.stats.held != 1, Date() < heldBy { usleep(10_000) }
        expectEqual(relay?.stats.held, 1, "\(String(describing: relay?.stats))")
        let held = #expect(throws: KVOClientError.self) { try NATSFaultRelaySocketTests.line(client, timeout: 0.05) }
        expectEqual(held.map { if case .timedOut = $0 { true } else { false } }, true, "\(String(describing: held))")
        relay?.blackhole(false)
        expectEqual(try NATSFaultRelaySocketTests.line(client), "PING")
        // The relay uncounts it just after sending it.
        let released = Date().addingTimeInterval(5)
        while relay?.stats.held != 0, Date() < released { usleep(10_000) }
        expectEqual(relay?.stats.held, 0, "\(String(describing: relay?.stats))")

        relay?.cut()
        let cut = #expect(throws: KVOClientError.self) { try NATSFaultRelaySocketTests.line(client) }
        expectEqual(cut.map { if case .connectionClosed = $0 { true } else { false } }, true, "\(String(describing: cut))")
        #expect(NATSFaultRelaySocketTests.receive(upstream, count: 1).isEmpty, "the server's side is closed too")

        // Later connections are relayed; the relay going away closes them and its port.
        let second = try KVOConnection(port: relayPort)
        defer { second.close() }
        let secondUpstream = try #require(NATSFaultRelaySocketTests.accept(listener))
        defer { close(secondUpstream) }
        // The relay counts the pair once both sockets are connected, on its accept thread: it may come just
        // after the upstream side was accepted here.
        let counted = Date().addingTimeInterval(5)
        while relay?.stats.connections != 2, Date() < counted { usleep(10_000) }
        expectEqual(relay?.stats.connections, 2)
        relay = nil
        let stopped = #expect(throws: KVOClientError.self) { try NATSFaultRelaySocketTests.line(second) }
        expectEqual(stopped.map { if case .connectionClosed = $0 { true } else { false } }, true, "\(String(describing: stopped))")
        let deadline = Date().addingTimeInterval(5)
        while (try? KVOConnection(port: relayPort)) != nil, Date() < deadline { usleep(20_000) }
        #expect((try? KVOConnection(port: relayPort)) == nil, "the relay's port still accepts")
    }
}
