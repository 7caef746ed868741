import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Presence in a cluster (docs/protocol.md, "Presence"; docs/design.md, "Presence"): a session lives on the
/// node its client reached; when it ends, that node submits its actions to the stream, and every node applies
/// them at the same stream position. The node that decided is killed right after: the writes are in the stream
/// already, every observer hears each once at the same revision, and the digests agree, the killed node's too
/// after its restart (which does not run them again). In the `cluster` suite so that it never runs beside another.
extension ClusterTests {
    @Test("presence on a three-node cluster: the deciding node's actions applied once everywhere, the node killed right after")
    func presenceWithTheDecidingNodeKilled() throws {
        let cluster = try LocalCluster(label: "presence", admin: (user: "root", password: "root-pw"))
        try cluster.waitUntilReady()
        let setup = try cluster.connect(1)
        try setup.call("create", ["object": "alice", "values": ["online": true]])
        let client = try cluster.connect(0)
        // n1 has applied alice (a write through another node) before its session's action names it.
        try client.call("get", ["object": "alice", "atLeastRev": try setup.call("get", ["object": "alice"])["rev"] ?? 0])
        try client.call("session", ["grace": 0.5])
        try client.call("onDisconnect", ["request": ["op": "set", "object": "alice", "keyPath": "online", "value": false]])
        try client.call("create", ["object": "alice.cursor", "values": ["x": 1], "ephemeral": true])
        let observers = try (1...2).map { index -> KVOConnection in
            let connection = try cluster.connect(index)
            _ = try connection.call("get", ["object": "alice.cursor", "atLeastRev": try client.call("get", ["object": "alice.cursor"])["rev"] ?? 0])
            try connection.call("observe", ["object": "alice", "keyPath": "online", "options": ["new"]])
            try connection.call("observe", ["pattern": "alice.cursor"])
            return connection
        }
        client.close()
        // The first observer hears the set: n1 decided and its writes are in the stream. Killed right then.
        var heard: [[JSONValue]] = [[], []]
        while heard[0].isEmpty, let event = try observers[0].nextEvent(timeout: 15) {
            if event["event"] == "change" { heard[0].append(event) }
        }
        cluster.nodes[0].send(signal: SIGKILL)
        for (index, observer) in observers.enumerated() {
            while heard[index].count < 2, let event = try observer.nextEvent(timeout: 15) {
                if event["event"] == "change" { heard[index].append(event) }
            }
            // Nothing twice.
            while let event = try observer.nextEvent(timeout: 1.5) {
                if event["event"] == "change" { heard[index].append(event) }
            }
        }
        for events in heard {
            expectEqual(events.count, 2, "\(events)")
            #expect(events.first?["object"] == "alice" && events.first?["change"]?["new"] == false, "\(events)")
            #expect(events.last?["object"] == "alice.cursor" && events.last?["reason"] == "sourceDeleted", "\(events)")
        }
        expectEqual(heard[0].map { $0["rev"] }, heard[1].map { $0["rev"] }, "the same revisions on n2 and n3: \(heard)")
        try cluster.restart(0, after: SIGKILL)
        let digests = try cluster.waitForConvergence(timeout: 30)
        expectEqual(Set(digests.map { $0["digest"]?.stringValue ?? "" }).count, 1, "\(digests)")
        for index in 0..<3 {
            let node = try cluster.connect(index)
            expectEqual(try node.call("get", ["object": "alice", "keyPath": "online"])["value"], false, "n\(index + 1)")
            expectEqual(try node.request("get", ["object": "alice.cursor"])["error"]?["code"], "not_found", "n\(index + 1)")
        }
        // The restarted node ran nothing again (its session was stored as ended with the actions' submission).
        expectEqual(try observers[0].nextEvent(timeout: 2), nil)
        // An ephemeral create still in the stream when its session ends (another connection takes the session
        // over and ends it at once, while the create travels): the object does not outlive the session on any node.
        for round in 0..<5 {
            let hasty = try cluster.connect(1)
            let id = try #require(try hasty.call("session", ["grace": 60])["session"]?.stringValue)
            let ender = try cluster.connect(1)
            try hasty.send(raw: Array(#"{"op":"create","object":"hasty.\#(round)","values":{},"ephemeral":true}"#.utf8) + [0x0A])
            try ender.send(raw: Array(#"{"op":"session","resume":"\#(id)"}"#.utf8) + [0x0A] + Array(#"{"op":"endSession"}"#.utf8) + [0x0A])
            _ = try ender.call("ping")
            hasty.close()
        }
        let settled = Date().addingTimeInterval(20)
        var left: [String] = []
        repeat {
            left = []
            for index in 0..<3 {
                let objects = try cluster.connect(index).call("list")["objects"]?.arrayValue ?? []
                left += objects.compactMap { $0.stringValue }.filter { $0.hasPrefix("hasty.") }.map { "n\(index + 1):\($0)" }
            }
            if left.isEmpty { break }
            usleep(100_000)
        } while Date() < settled
        #expect(left.isEmpty, "ephemeral objects that outlived their session: \(left)")
        let after = try cluster.waitForConvergence(timeout: 30)
        expectEqual(Set(after.map { $0["digest"]?.stringValue ?? "" }).count, 1, "\(after)")
    }
}
