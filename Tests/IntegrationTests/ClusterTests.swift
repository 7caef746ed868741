import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// The cluster (docs/design.md, "Cluster") with real processes on loopback: three nats-server nodes with
/// JetStream and three `kvod --cluster` nodes (`LocalCluster`). Writes on any node reach observers on
/// every node with the same revisions in the same order; nodes end with equal state digests; a node
/// killed with SIGKILL restarts, catches up from its stored stream sequence and matches the others; a
/// client resuming on another node with `sinceRev` misses and repeats nothing; without a NATS quorum
/// writes fail with `unavailable` after the deadline while reads go on.
@Suite("cluster", .serialized, .enabled(if: LocalCluster.natsServerPath != nil,
                                        "nats-server is not installed (scripts/setup.sh installs it)"))
struct ClusterTests {
    /// The `rev` and `change` of each of the next `count` change events on `connection`, as compact JSON.
    private func changes(_ connection: KVOConnection, count: Int) throws -> [String] {
        try connection.changeEvents(count, keeping: ["rev", "change"])
    }

    /// Waits until `node` has object `id` (it applied the write that created it).
    private func waitForObject(_ id: String, on node: KVODProcess, timeout: Double = 10) throws {
        let client = try node.connect()
        let deadline = Date().addingTimeInterval(timeout)
        while try client.request("get", ["object": .string(id)])["ok"] != true {
            guard Date() < deadline else { throw LocalClusterError.notReady("\(id) never reached port \(node.port)") }
            usleep(20_000)
        }
    }

    @Test("writes on one node reach observers on every node with the same revisions")
    func writesReachObserversEverywhere() throws {
        let cluster = try LocalCluster(label: "fanout")
        try cluster.waitUntilReady()
        let writer = try cluster.nodes[0].connect()
        try writer.call("create", ["object": "doc", "values": ["n": 0]])
        var observers: [KVOConnection] = []
        for node in cluster.nodes {
            try waitForObject("doc", on: node)
            let observer = try node.connect()
            try observer.call("observe", ["object": "doc", "keyPath": "n", "options": ["new", "old"]])
            observers.append(observer)
        }
        var revisions: [Int64] = []
        for value in 1...20 {
            let reply = try writer.call("set", ["object": "doc", "keyPath": "n", "value": .int(Int64(value))])
            revisions.append(try #require(reply["rev"]?.intValue))
        }
        expectEqual(revisions, Array(revisions[0]...(revisions[0] + 19)), "revisions advance by one per write: \(revisions)")
        let seen = try observers.map { try changes($0, count: 20) }
        expectEqual(seen[0].count, 20)
        expectEqual(seen[1], seen[0])
        expectEqual(seen[2], seen[0])
        expectEqual(seen[0].first?.contains("\"rev\":\(revisions[0])"), true, "\(seen[0].first ?? "none")")
        // The replies' revisions are the observers'.
        let digests = try cluster.waitForConvergence()
        expectEqual(Set(digests.map { $0["digest"]?.stringValue ?? "" }).count, 1, "\(digests)")
        #expect(digests.allSatisfy { $0["rev"]?.intValue == revisions.last }, "\(digests)")
        // `status` (issue 42): each node's place in the stream, as its digest says, and no alarm.
        for (index, node) in cluster.nodes.enumerated() {
            let status = try node.connect().call("status")
            let place = try #require(status["cluster"]?.objectValue, "\(status)")
            #expect(place["node"] == .string("n\(index + 1)") && place["state"] == "applying", "\(place)")
            #expect(place["applied"] == digests[index]["applied"] && place["stream"]?.stringValue?.isEmpty == false, "\(place)")
            #expect(status["rev"]?.intValue == revisions.last && status["alarms"] == [], "\(status)")
        }
    }

    @Test("interleaved writes on three nodes: same events everywhere, refusals alike, equal digests")
    func interleavedWritesConverge() throws {
        let cluster = try LocalCluster(label: "interleave")
        try cluster.waitUntilReady()
        let first = try cluster.nodes[0].connect()
        try first.call("defineClass", ["class": try json(#"{"name":"Gauge","properties":{"level":{"type":"integer","min":0,"max":100}}}"#)])
        try first.call("create", ["object": "doc", "values": ["n": "start", "items": []]])
        try first.call("create", ["object": "gauge", "class": "Gauge", "values": ["level": 1]])
        var observers: [KVOConnection] = []
        for node in cluster.nodes {
            try waitForObject("gauge", on: node)
            let observer = try node.connect()
            try observer.call("observe", ["object": "doc", "keyPath": "n", "options": ["new"]])
            try observer.call("observe", ["object": "doc", "keyPath": "items.@count", "options": ["new"]])
            try observer.call("observe", ["object": "gauge", "keyPath": "level", "options": ["new"]])
            observers.append(observer)
        }
        let rounds = 25
        let ports = cluster.nodes.map(\.port)
        let failures = FailureLog()
        // One writer per node, all at once: sets, array inserts, and writes the class refuses.
        DispatchQueue.concurrentPerform(iterations: 3) { writer in
            do {
                let client = try KVOConnection(host: "127.0.0.1", port: ports[writer])
                for round in 0..<rounds {
                    try client.call("set", ["object": "doc", "keyPath": "n", "value": .string("n\(writer + 1)-\(round)")])
                    try client.call("insert", ["object": "doc", "keyPath": "items", "value": .string("w\(writer)r\(round)")])
                    let level = Int64(writer * 40 + round)  // 0...104: the last few of writer 3 are over the maximum
                    let reply = try client.request("set", ["object": "gauge", "keyPath": "level", "value": .int(level)])
                    if level > 100 {
                        if reply["error"]?["code"] != "invalid_value" { failures.add("level \(level) was not refused: \(reply)") }
                    } else if reply["ok"] != true {
                        failures.add("level \(level): \(reply)")
                    }
                }
            } catch {
                failures.add("writer \(writer): \(error)")
            }
        }
        #expect(failures.all.isEmpty, "\(failures.all)")
        // 75 sets of n, 75 inserts, 75 gauge sets of which 4 refused (levels 101...104).
        let expected = 3 * rounds + 3 * rounds + (3 * rounds - 4)
        let seen = try observers.map { try changes($0, count: expected) }
        expectEqual(seen[0].count, expected)
        expectEqual(seen[1], seen[0], "n2's observer saw another sequence")
        expectEqual(seen[2], seen[0], "n3's observer saw another sequence")
        let digests = try cluster.waitForConvergence()
        expectEqual(Set(digests.map { $0["digest"]?.stringValue ?? "" }).count, 1, "\(digests)")
        expectEqual(Set(digests.map { $0["rev"]?.intValue ?? -1 }).count, 1, "\(digests)")
    }

    @Test("a node killed with SIGKILL under writes restarts, catches up and matches")
    func killedNodeCatchesUp() throws {
        let cluster = try LocalCluster(label: "sigkill")
        try cluster.waitUntilReady()
        let writer = try cluster.nodes[0].connect()
        try writer.call("create", ["object": "log", "values": ["last": 0]])
        try waitForObject("log", on: cluster.nodes[2])
        var acknowledged: [Int64: Int64] = [:]  // value -> rev
        for value in 1...40 {
            if value == 20 { cluster.nodes[2].stop(signal: SIGKILL) }
            let reply = try writer.call("set", ["object": "log", "keyPath": .string("v\(value)"), "value": .int(Int64(value))])
            acknowledged[Int64(value)] = try #require(reply["rev"]?.intValue)
        }
        try cluster.restart(2, after: SIGKILL)
        let digests = try cluster.waitForConvergence(timeout: 30)
        expectEqual(Set(digests.map { $0["digest"]?.stringValue ?? "" }).count, 1, "\(digests)")
        let restored = try cluster.nodes[2].connect().call("get", ["object": "log"])
        for (value, _) in acknowledged {
            expectEqual(restored["value"]?["v\(value)"]?.intValue, value, "v\(value) missing on the restarted node")
        }
        // The log is collected from stderr asynchronously: wait for the line.
        #expect(cluster.nodes[2].waitForLog("subscribed to stream"), "\(cluster.nodes[2].log)")
    }

    @Test("a client resuming on another node with sinceRev misses and repeats nothing")
    func resumeOnAnotherNode() throws {
        let cluster = try LocalCluster(label: "resume")
        try cluster.waitUntilReady()
        let writer = try cluster.nodes[1].connect()
        try writer.call("create", ["object": "feed", "values": ["n": 0]])
        for node in cluster.nodes { try waitForObject("feed", on: node) }
        // A reference observer that never disconnects, on n2.
        let reference = try cluster.nodes[1].connect()
        try reference.call("observe", ["object": "feed", "keyPath": "n", "options": ["new", "old"]])
        // The resuming client starts on n1 and sees the first 10 changes.
        let client = try cluster.nodes[0].connect()
        try client.call("observe", ["object": "feed", "keyPath": "n", "options": ["new", "old"]])
        for value in 1...10 { try writer.call("set", ["object": "feed", "keyPath": "n", "value": .int(Int64(value))]) }
        let before = try changes(client, count: 10)
        let lastRev = try #require(try JSONParser.parse(before.last ?? "{}")["rev"]?.intValue)
        client.close()
        // Changes it misses while away.
        var lastWritten: Int64 = 0
        for value in 11...25 {
            lastWritten = try #require(try writer.call("set", ["object": "feed", "keyPath": "n", "value": .int(Int64(value))])["rev"]?.intValue)
        }
        // atLeastRev: n3 answers once it has applied what the client saw (no waiting for convergence here).
        let resumed = try cluster.nodes[2].connect()
        try resumed.call("observe", ["object": "feed", "keyPath": "n", "options": ["new", "old"], "sinceRev": .int(lastRev),
                                     "atLeastRev": .int(lastWritten)])
        for value in 26...30 { try writer.call("set", ["object": "feed", "keyPath": "n", "value": .int(Int64(value))]) }
        let after = try changes(resumed, count: 20)
        let all = try changes(reference, count: 30)
        expectEqual(before + after, all, "the resumed client's changes differ from the reference observer's")
    }

    @Test("atLeastRev: a read or observe on a node behind waits for the revision, in request order, or times out")
    func atLeastRevReadsYourWrites() throws {
        let cluster = try LocalCluster(label: "atleast", kvodArguments: ["--cluster-write-timeout", "2"])
        try cluster.waitUntilReady()
        let writer = try cluster.nodes[0].connect()
        try writer.call("create", ["object": "doc", "values": ["n": 0]])
        try waitForObject("doc", on: cluster.nodes[2])
        // An observer that stays on n1 and sees every change: the reference.
        let reference = try cluster.nodes[0].connect()
        try reference.call("observe", ["object": "doc", "keyPath": "n", "options": ["new", "old"]])
        let client = try cluster.nodes[0].connect()
        try client.call("observe", ["object": "doc", "keyPath": "n", "options": ["new", "old"]])
        for value in 1...5 { try writer.call("set", ["object": "doc", "keyPath": "n", "value": .int(Int64(value))]) }
        let before = try changes(client, count: 5)
        let lastSeen = try #require(try JSONParser.parse(before.last ?? "{}")["rev"]?.intValue)
        client.close()

        // n3 is frozen while n1 takes more writes, and gets requests for the revision after them: they must
        // wait (in order on their connection) until that revision is written and applied there.
        cluster.nodes[2].send(signal: SIGSTOP)
        var lastRev: Int64 = 0
        for value in 6...10 {
            lastRev = try #require(try writer.call("set", ["object": "doc", "keyPath": "n", "value": .int(Int64(value))])["rev"]?.intValue)
        }
        let reader = try cluster.nodes[2].connect()
        let resumed = try cluster.nodes[2].connect()
        // Pipelined on one connection: a get that must wait, then a get without atLeastRev (answered after it).
        try reader.send(.object(["op": "get", "id": 1, "object": "doc", "keyPath": "n", "atLeastRev": .int(lastRev + 1)]))
        try reader.send(.object(["op": "get", "id": 2, "object": "doc", "keyPath": "n"]))
        try resumed.send(.object(["op": "observe", "id": 1, "object": "doc", "keyPath": "n", "options": ["new", "old"],
                                  "sinceRev": .int(lastSeen), "atLeastRev": .int(lastRev + 1)]))
        cluster.nodes[2].send(signal: SIGCONT)
        // The marker instead of waiting a while: a get for lastRev on a later connection is answered once n3 has
        // read the requests above (it accepts connections in order, on one loop) and applied every write so far,
        // and a ping after that answer comes after any reply they got. They must have got none.
        let barrier = try cluster.nodes[2].connect()
        expectEqual(try barrier.call("get", ["object": "doc", "keyPath": "n", "atLeastRev": .int(lastRev)], timeout: 20)["value"], 10)
        try barrier.call("ping")
        #expect(throws: KVOClientError.self, "a reply came before the revision was written") { try reader.readMessage(timeout: 0.05) }
        #expect(throws: KVOClientError.self, "an observe reply came before the revision was written") { try resumed.readMessage(timeout: 0.05) }
        let rev11 = try writer.call("set", ["object": "doc", "keyPath": "n", "value": 11])["rev"]?.intValue
        expectEqual(rev11, lastRev + 1)
        let first = try reader.readMessage(timeout: 20)
        let second = try reader.readMessage(timeout: 20)
        #expect(first["id"] == 1 && first["value"] == 11, "the held get saw an older value: \(first)")
        #expect(second["id"] == 2 && second["value"] == 11, "the next get was not answered after it: \(second)")
        // The resumed observer is answered once n3 is at lastRev + 1, replays what it missed, with no
        // resync, then lives on.
        let observeReply = try resumed.readMessage(timeout: 20)
        #expect(observeReply["ok"] == true && (observeReply["rev"]?.intValue ?? 0) >= lastRev + 1, "\(observeReply)")
        try writer.call("set", ["object": "doc", "keyPath": "n", "value": 12])
        var resumedEvents: [JSONValue] = []
        while resumedEvents.count < 7, let event = try resumed.nextEvent(timeout: 20) { resumedEvents.append(event) }
        #expect(!resumedEvents.contains { $0["reason"] == "resync" }, "\(resumedEvents)")
        let after = resumedEvents.map { JSONValue.object(["rev": $0["rev"] ?? .null, "change": $0["change"] ?? .null]).description }
        expectEqual(before + after, (try changes(reference, count: 12)), "the observer resumed on n3 missed or repeated a change")

        // list and info take it too; a revision nobody writes is answered unavailable after the deadline,
        // and the connection serves its next request.
        let other = try cluster.nodes[1].connect()
        #expect(try other.call("list", ["atLeastRev": .int(lastRev)])["objects"] != nil)
        expectEqual(try other.call("info", ["object": "doc", "atLeastRev": .int(lastRev)])["ok"], true)
        let started = Date()
        let late = try other.request("get", ["object": "doc", "atLeastRev": .int(lastRev + 1000)], timeout: 20)
        let waited = Date().timeIntervalSince(started)
        expectEqual(late["error"]?["code"], "unavailable", "\(late)")
        #expect(waited >= 1.5 && waited < 6, "answered after \(waited) s")
        #expect(try other.call("get", ["object": "doc", "keyPath": "n"])["value"] != nil)
    }

    @Test("without a NATS quorum writes fail with unavailable after the deadline, reads go on, writes resume")
    func writesFailWithoutQuorumAndResume() throws {
        let cluster = try LocalCluster(label: "quorum", kvodArguments: ["--cluster-write-timeout", "2"])
        try cluster.waitUntilReady()
        let client = try cluster.nodes[0].connect()
        try client.call("create", ["object": "q", "values": .object(["n": 0])])
        cluster.killNATS(1)
        cluster.killNATS(2)
        let started = Date()
        let reply = try client.request("set", ["object": "q", "keyPath": "n", "value": 1], timeout: 20)
        let waited = Date().timeIntervalSince(started)
        expectEqual(reply["error"]?["code"], "unavailable", "\(reply)")
        #expect(waited >= 1.5 && waited < 6, "answered after \(waited) s")
        // Reads are local and keep working; the connection serves its next request.
        #expect(try client.call("get", ["object": "q", "keyPath": "n"])["value"] != nil)
        try cluster.restartNATS(1)
        try cluster.restartNATS(2)
        // Writes resume once the stream has a leader again and this node's ordered consumer is re-created
        // (its heartbeats are 1 s): 2-7 s after the restart here, about 18 s with libnats's default 5 s.
        let deadline = Date().addingTimeInterval(60)
        var resumed = false
        while Date() < deadline {
            let retry = try client.request("set", ["object": "q", "keyPath": "n", "value": 2], timeout: 20)
            if retry["ok"] == true { resumed = true; break }
            expectEqual(retry["error"]?["code"], "unavailable", "\(retry)")
        }
        #expect(resumed, "writes did not resume once NATS was back")
        let digests = try cluster.waitForConvergence(timeout: 30)
        expectEqual(Set(digests.map { $0["digest"]?.stringValue ?? "" }).count, 1, "\(digests)")
    }
}

/// Failures collected from writer threads.
private final class FailureLog: @unchecked Sendable {
    private let lock = NSLock()
    private var failures: [String] = []

    func add(_ failure: String) {
        lock.lock()
        failures.append(failure)
        lock.unlock()
    }

    var all: [String] {
        lock.lock()
        defer { lock.unlock() }
        return failures
    }
}
