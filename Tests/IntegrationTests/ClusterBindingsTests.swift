import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Bindings in cluster mode (docs/design.md, "Cluster") with real processes (`LocalCluster`): `bind`,
/// `combineLatest` and `unbind` go through the stream, so every node makes the same bindings with the
/// same ids and every binding write gets the same revision everywhere; the creator's `binding` notices
/// reach its connection on its own node, while the other nodes only log them; a node restarted from its
/// store has the same bindings as the others.
@Suite("cluster bindings", .serialized, .enabled(if: LocalCluster.natsServerPath != nil,
                                                 "nats-server is not installed (scripts/setup.sh installs it)"))
struct ClusterBindingsTests {
    private static func endpoint(_ object: String, _ keyPath: String) -> JSONValue {
        ["object": .string(object), "keyPath": .string(keyPath)]
    }

    /// The `object`, `keyPath`, `rev` and `change` of each of the next `count` change events on `connection`, as compact JSON.
    private func changes(_ connection: KVOConnection, count: Int) throws -> [String] {
        try connection.changeEvents(count, keeping: ["object", "keyPath", "rev", "change"])
    }

    /// Waits until every node has object `id`.
    private func waitForObject(_ id: String, in cluster: LocalCluster, timeout: Double = 10) throws {
        for node in cluster.nodes {
            let client = try node.connect()
            let deadline = Date().addingTimeInterval(timeout)
            while try client.request("get", ["object": .string(id)])["ok"] != true {
                guard Date() < deadline else { throw LocalClusterError.notReady("\(id) never reached port \(node.port)") }
                usleep(20_000)
            }
        }
    }

    /// Every node's value at `object`/`keyPath`, after the nodes converged.
    private func values(_ cluster: LocalCluster, _ object: String, _ keyPath: String) throws -> [JSONValue] {
        try cluster.waitForConvergence()
        return try cluster.nodes.map { try $0.connect().call("get", ["object": .string(object), "keyPath": .string(keyPath)])["value"] ?? .null }
    }

    /// Every node's `bindings` listing.
    private func listings(_ cluster: LocalCluster) throws -> [JSONValue] {
        try cluster.waitForConvergence()
        return try cluster.nodes.map { try $0.connect().call("bindings")["bindings"] ?? .null }
    }

    @Test("bind and combineLatest made on n1, sources written on n2 and n3, unbind on n3, a restart: alike everywhere")
    func bindingsAreReplicated() throws {
        let cluster = try LocalCluster(label: "bindings")
        try cluster.waitUntilReady()
        let creator = try cluster.nodes[0].connect()
        try creator.call("create", ["object": "src", "values": ["x": ["a": 1], "n": 1]])
        try creator.call("create", ["object": "dst", "values": ["y": 0]])
        try creator.call("create", ["object": "c", "values": ["sum": 0]])
        try waitForObject("c", in: cluster)
        // Observers of every target on every node. On n2 only, an observer of src.x made before the
        // bindings: its watched path is older there than binding 1's, so the write to src.x below finds
        // binding 2's path first on n2 and binding 1's first elsewhere; the engine must apply them in id
        // order all the same, or the targets' revisions differ between nodes.
        var observers: [KVOConnection] = []
        for node in cluster.nodes {
            let observer = try node.connect()
            for (object, keyPath) in [("dst", "y"), ("dst", "whole"), ("c", "sum")] {
                try observer.call("observe", ["object": .string(object), "keyPath": .string(keyPath), "options": ["new", "old"]])
            }
            observers.append(observer)
        }
        let early = try cluster.nodes[1].connect()
        try early.call("observe", ["object": "src", "keyPath": "x", "options": ["new"]])

        let bind = try creator.call("bind", ["from": Self.endpoint("src", "x.a"), "to": Self.endpoint("dst", "y"),
                                             "convert": "$value * 10", "now": true])
        expectEqual(bind["binding"], 1, "\(bind)")
        let whole = try creator.call("bind", ["from": Self.endpoint("src", "x"), "to": Self.endpoint("dst", "whole")])
        expectEqual(whole["binding"], 2, "\(whole)")
        let combined = try creator.call("combineLatest", [
            "sources": [Self.endpoint("src", "n"), Self.endpoint("dst", "y")], "to": Self.endpoint("c", "sum"),
            "reduce": "$0 + $1", "now": true,
        ])
        expectEqual(combined["binding"], 3, "\(combined)")
        // One write on n2 fires bindings 1 and 2, and binding 1's write fires 3: three writes of their own.
        let writerB = try cluster.nodes[1].connect()
        let sourceRev = try #require(try writerB.call("set", ["object": "src", "keyPath": "x", "value": ["a": 5]])["rev"]?.intValue)
        // A write on n3 to combineLatest's other source.
        let writerC = try cluster.nodes[2].connect()
        try writerC.call("set", ["object": "src", "keyPath": "n", "value": 2])

        // now: dst.y 10, c.sum 11; the write to src.x: dst.y 50, dst.whole {a:5}, c.sum 51; src.n: c.sum 52.
        let seen = try observers.map { try changes($0, count: 6) }
        expectEqual(seen[0].count, 6, "\(seen[0])")
        expectEqual(seen[1], seen[0], "n2's observer saw other binding writes: \(seen[1]) vs \(seen[0])")
        expectEqual(seen[2], seen[0], "n3's observer saw other binding writes: \(seen[2]) vs \(seen[0])")
        #expect(seen[0].dropFirst(2).first?.contains("\"rev\":\(sourceRev + 1)") == true,
                "binding 1 writes right after the source write, in its request: \(seen[0])")
        expectEqual(try values(cluster, "dst", "y"), [50, 50, 50])
        expectEqual(try values(cluster, "dst", "whole"), [["a": 5], ["a": 5], ["a": 5]])
        expectEqual(try values(cluster, "c", "sum"), [52, 52, 52])
        var lists = try listings(cluster)
        expectEqual(lists[0].arrayValue?.compactMap { $0["binding"]?.intValue }, [1, 2, 3], "\(lists[0])")
        #expect(lists[1] == lists[0] && lists[2] == lists[0], "\(lists)")

        // unbind on n3 stops combineLatest on every node.
        expectEqual(try writerC.call("unbind", ["binding": 3])["removed"], true)
        try writerB.call("set", ["object": "src", "keyPath": "n", "value": 3])
        expectEqual(try values(cluster, "c", "sum"), [52, 52, 52], "combineLatest still ran after unbind")
        lists = try listings(cluster)
        expectEqual(lists[0].arrayValue?.compactMap { $0["binding"]?.intValue }, [1, 2], "\(lists[0])")
        #expect(lists[1] == lists[0] && lists[2] == lists[0], "\(lists)")

        // n3 killed and restarted: the bindings it restores from its store are the others', and run alike.
        try cluster.restart(2, after: SIGKILL)
        try writerB.call("set", ["object": "src", "keyPath": "x", "value": ["a": 7]])
        expectEqual(try values(cluster, "dst", "y"), [70, 70, 70])
        lists = try listings(cluster)
        #expect(lists[1] == lists[0] && lists[2] == lists[0], "\(lists)")

        // Deleting the source on n2 removes bindings 1 and 2 everywhere; the creator, on n1, is told.
        try writerB.call("delete", ["object": "src"])
        var notices: [JSONValue] = []
        while notices.count < 2, let event = try creator.nextEvent(timeout: 10) {
            if event["event"] == "binding" { notices.append(event) }
        }
        expectEqual(notices.map { $0["binding"] }, [1, 2], "\(notices)")
        #expect(notices.allSatisfy { $0["reason"] == "removed" && $0["cause"] == "sourceDeleted" && $0["object"] == "src" },
                "\(notices)")
        lists = try listings(cluster)
        expectEqual(lists, [[], [], []], "\(lists)")
        // The other nodes log it (nobody there created the binding).
        #expect(cluster.nodes[1].waitForLog("binding 1 removed: sourceDeleted"), "\(cluster.nodes[1].log.suffix(2000))")
        // A new binding continues the ids on every node.
        try creator.call("create", ["object": "src", "values": ["x": ["a": 1], "n": 1]])
        expectEqual(try creator.call("bind", ["from": Self.endpoint("src", "n"), "to": Self.endpoint("c", "sum")])["binding"], 4)
        let digests = try cluster.waitForConvergence()
        expectEqual(Set(digests.map { $0["digest"]?.stringValue ?? "" }).count, 1, "\(digests)")
        expectEqual(Set(digests.map { $0["rev"]?.intValue ?? -1 }).count, 1, "\(digests)")
    }
}
