import Foundation
import KVOWireProbe
import KVOJSON
import Testing
@testable import KVOServer
@testable import KVOTestSupport

/// The failure modes seen in JetStream replicas that drifted (docs/design.md, "Integrity of the stream"),
/// injected between one kvod node and its NATS servers by `NATSFaultRelay`: a copy numbered differently,
/// an entry missing from one node's copy, a different entry at one sequence, and a node cut off while the
/// stream is trimmed past it. Each is detected before or soon after anything wrong is applied, the node
/// refuses writes meanwhile and repairs itself (consuming again once a copy continues what it applied, or
/// installing a snapshot in place), and no acknowledged write is lost. In the `cluster` suite.
extension ClusterTests {
    /// Node `index`'s applied sequence.
    private static func applied(_ cluster: LocalCluster, _ index: Int) throws -> Int64 {
        try #require(try cluster.connect(index).call("digest")["applied"]?.intValue)
    }

    /// What node `index` said of the stream's integrity (its critical and notice lines), for the test's output.
    private static func integrityLines(_ cluster: LocalCluster, _ index: Int) -> String {
        cluster.nodes[index].log.split(separator: "\n").filter { $0.contains("cluster:") && ($0.contains(" critical ") || $0.contains(" notice ")) }
            .map { "  n\(index + 1) " + $0.suffix(400) }.joined(separator: "\n")
    }

    /// Every node's digest equal and every node applying; the values of `w.log` on each node.
    private static func expectConverged(_ cluster: LocalCluster, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let digests = try cluster.waitForConvergence(timeout: 30)
        #expect(Set(digests.map { $0["digest"]?.stringValue ?? "" }).count == 1, "\(digests)", sourceLocation: sourceLocation)
        #expect(Set(digests.map { $0["chain"]?.stringValue ?? "" }).count == 1, "\(digests)", sourceLocation: sourceLocation)
        #expect(digests.allSatisfy { $0["integrity"] == "applying" }, "\(digests)", sourceLocation: sourceLocation)
    }

    @Test("a copy numbered one lower: the node halts before applying any of it, refuses writes, and goes on once a copy continues it")
    func renumberedCopyHalts() throws {
        let cluster = try LocalCluster(label: "renumber", relayedNode: 1)
        try cluster.waitUntilReady()
        let writer = try cluster.connect(0)
        try writer.call("create", ["object": "w", "values": ["log": []]])
        for value in 1...3 { try writer.call("insert", ["object": "w", "keyPath": "log", "value": .int(Int64(value))]) }
        let at = UInt64(try cluster.waitForConvergence()[1]["applied"]?.intValue ?? 0)
        for relay in cluster.relays { relay.renumber(after: at, by: -1) }
        for value in 4...6 { try writer.call("insert", ["object": "w", "keyPath": "log", "value": .int(Int64(value))]) }
        #expect(cluster.nodes[1].waitForLog("numbered differently", timeout: 10), "n2 did not notice:\n\(cluster.nodes[1].log.suffix(2000))")
        let refused = try cluster.nodes[1].connect().request("insert", ["object": "w", "keyPath": "log", "value": 99], timeout: 10)
        expectEqual(refused["error"]?["code"], "unavailable", "\(refused)")
        #expect(cluster.relays.reduce(0) { $0 + $1.injected } > 0)
        expectEqual(try Self.applied(cluster, 1), Int64(at), "n2 applied something of the renumbered copy")
        for relay in cluster.relays { relay.clear() }
        #expect(cluster.nodes[1].waitForLog("applying and taking writes again", timeout: 15), "n2 did not resume:\n\(cluster.nodes[1].log.suffix(2000))")
        try cluster.connect(1).call("insert", ["object": "w", "keyPath": "log", "value": 7])
        try Self.expectConverged(cluster)
        for index in cluster.nodes.indices {
            expectEqual(try cluster.connect(index).call("get", ["object": "w", "keyPath": "log"])["value"], .array((1...7).map { .int(Int64($0)) }))
        }
        print("\(#function):\n\(Self.integrityLines(cluster, 1))")
    }

    @Test("an entry missing from one node's copy: the node notices the publisher's gap before applying past it and repairs from a whole copy")
    func missingEntryInOneCopy() throws {
        let cluster = try LocalCluster(label: "drop", relayedNode: 1)
        try cluster.waitUntilReady()
        let writer = try cluster.connect(0)
        try writer.call("create", ["object": "w", "values": ["log": []]])
        let at = UInt64(try cluster.waitForConvergence()[1]["applied"]?.intValue ?? 0)
        for relay in cluster.relays { relay.dropDelivery(sequence: at + 2) }
        for value in 1...5 { try writer.call("insert", ["object": "w", "keyPath": "log", "value": .int(Int64(value))]) }
        #expect(cluster.nodes[1].waitForLog("1 missing", timeout: 10), "n2 did not notice:\n\(cluster.nodes[1].log.suffix(2000))")
        #expect(cluster.relays.reduce(0) { $0 + $1.stats.dropped } > 0)
        // Another copy (the relay no longer drops): consumed again, n2 applies what it lacked.
        for relay in cluster.relays { relay.clear() }
        try Self.expectConverged(cluster)
        for index in cluster.nodes.indices {
            expectEqual(try cluster.connect(index).call("get", ["object": "w", "keyPath": "log"])["value"], .array((1...5).map { .int(Int64($0)) }))
        }
        #expect(!cluster.nodes[1].log.contains("the stream lost those batches"))
        print("\(#function):\n\(Self.integrityLines(cluster, 1))")
    }

    @Test("a different entry at one sequence on one node: its running hash is the minority's at the next checkpoint; it installs a snapshot in place and converges")
    func substitutedEntryDiverges() throws {
        let cluster = try LocalCluster(label: "substitute", kvodArguments: ["--cluster-checkpoint-every", "16", "--cluster-snapshot-every", "48"],
                                       relayedNode: 1)
        try cluster.waitUntilReady()
        let writer = try cluster.connect(0)
        try writer.call("create", ["object": "doc", "values": ["n": 0]])
        let at = UInt64(try cluster.waitForConvergence()[1]["applied"]?.intValue ?? 0)
        let other = ReplicationEntry(version: 3, node: "n1", batch: "n1.other.1",
                                     operations: [.init(line: Array(#"{"op":"set","object":"doc","keyPath":"n","value":-5}"#.utf8), user: nil)])
        for relay in cluster.relays { relay.substitute(sequence: at + 1, with: other.encoded()) }
        var value = 0
        while try Self.applied(cluster, 0) < 60 {
            value += 1
            try writer.call("set", ["object": "doc", "keyPath": "n", "value": .int(Int64(value))])
        }
        #expect(cluster.relays.reduce(0) { $0 + $1.stats.substituted } > 0)
        #expect(cluster.nodes[1].waitForLog("in place", timeout: 30), "n2 did not re-bootstrap:\n\(cluster.nodes[1].log.suffix(3000))")
        try writer.call("set", ["object": "doc", "keyPath": "n", "value": -1])
        try Self.expectConverged(cluster)
        expectEqual(try cluster.connect(1).call("get", ["object": "doc", "keyPath": "n"])["value"], -1)
        for index in [0, 2] { #expect(!cluster.nodes[index].log.contains("diverged"), "n\(index + 1) diverged") }
        print("\(#function):\n\(Self.integrityLines(cluster, 1))")
    }

    @Test("a node cut off while the stream is trimmed past it installs a snapshot in place, without exiting, and converges")
    func trimmedPastNodeRebootstrapsInPlace() throws {
        let cluster = try LocalCluster(label: "trimmed", kvodArguments: ["--cluster-snapshot-every", "10"], relayedNode: 2)
        try cluster.waitUntilReady()
        let writer = try cluster.connect(0)
        try writer.call("create", ["object": "doc", "values": ["n": 0]])
        let frozenAt = try #require(try cluster.waitForConvergence()[2]["applied"]?.intValue)
        let observer = try cluster.nodes[2].connect()
        try observer.call("observe", ["object": "doc", "keyPath": "n", "options": ["new"]])
        for relay in cluster.relays { relay.blackhole(true) }
        for value in 1...40 { try writer.call("set", ["object": "doc", "keyPath": "n", "value": .int(Int64(value))]) }
        let first = try cluster.waitForTrim()
        #expect(first > frozenAt + 1, "the stream starts at \(first), n3 had applied \(frozenAt)")
        for relay in cluster.relays { relay.cut() }
        for relay in cluster.relays { relay.clear() }
        let rebootstrapped = cluster.nodes[2].waitForLog("in place", timeout: 30)
        #expect(rebootstrapped, "n3 did not re-bootstrap:\n\(cluster.nodes[2].log.suffix(3000))")
        #expect(cluster.nodes[2].process.isRunning, "n3 exited")
        // Its observer's connection was closed with the state it observed.
        var closed = false
        for _ in 0..<20 where !closed {
            do { _ = try observer.nextEvent(timeout: 1) } catch { closed = true }
        }
        #expect(closed, "n3 kept its observer's connection open across the new state")
        try writer.call("set", ["object": "doc", "keyPath": "n", "value": 41])
        try Self.expectConverged(cluster)
        expectEqual(try cluster.nodes[2].connect().call("get", ["object": "doc", "keyPath": "n"])["value"], 41)
        print("\(#function):\n\(Self.integrityLines(cluster, 2))")
    }
}
