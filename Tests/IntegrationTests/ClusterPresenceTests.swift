import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Presence in a cluster (docs/protocol.md, "Presence"; docs/design.md, "Presence"): sessions are replicated
/// state; when one ends, its actions run inside the `end` entry, at the same stream position on every node. The
/// node its client was on is killed right after: the writes are in the stream already, every observer hears each once at the same revision, and the digests agree, the killed node's too
/// after its restart (which does not run them again). Then, on the same cluster, n3 is cut from NATS
/// (`partitionFromNATS`) while a session ends there: its writes wait past the write deadline and run once after the
/// heal, `endSession` is `unavailable` while appends stall, and a `touch` stamped on n3 before a later, acknowledged
/// one on n1 does not move the deadline back. In the `cluster` suite so that it never runs beside another.
extension ClusterTests {
    @Test("presence on a three-node cluster: the deciding node's actions applied once everywhere, the node killed right after")
    func presenceWithTheDecidingNodeKilled() throws {
        // A 2 s write deadline: the cut below outlasts it without costing much time.
        let cluster = try LocalCluster(label: "presence", kvodArguments: ["--cluster-write-timeout", "2"],
                                       admin: (user: "root", password: "root-pw"), proxiedNode: 2)
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
        #expect(Set(after.map { $0["digest"]?.stringValue ?? "" }).count == 1, "\(after)")
        try sessionsThroughACut(cluster)
    }

    /// n3 cut from NATS for 3.5 s (the write deadline is 2 s): a session that ends there 0.6 s into the cut keeps
    /// its writes until the heal, then they run once; `endSession` while the cut stalls n3's appends is
    /// `unavailable` and the session stays; a `touch` stamped on n3 during the cut and appended after n1's later
    /// one is applied at n1's time (apply times never go back in the stream), so the deadline n1 acknowledged holds.
    private func sessionsThroughACut(_ cluster: LocalCluster) throws {
        let setup = try cluster.connect(0)
        try setup.call("create", ["object": "cut.status", "values": ["online": true]])
        try setup.call("create", ["object": "cut.lease", "values": [:], "ttl": 60])
        let rev = try setup.call("get", ["object": "cut.lease"])["rev"] ?? 0
        let leaver = try cluster.connect(2)
        let stayer = try cluster.connect(2)
        let toucher = try cluster.connect(2)
        try toucher.call("get", ["object": "cut.lease", "atLeastRev": rev])
        try leaver.call("session", ["grace": 0.6])
        try leaver.call("onDisconnect", ["request": ["op": "set", "object": "cut.status", "keyPath": "online", "value": false]])
        try leaver.call("create", ["object": "cut.cursor", "values": [:], "ephemeral": true])
        try stayer.call("session", ["grace": 60])
        try stayer.call("onDisconnect", ["request": ["op": "set", "object": "cut.status", "keyPath": "stayer", "value": "gone"]])
        let observer = try cluster.connect(0)
        _ = try observer.call("get", ["object": "cut.cursor", "atLeastRev": try leaver.call("get", ["object": "cut.cursor"])["rev"] ?? 0])
        try observer.call("observe", ["object": "cut.status", "keyPath": "online", "options": ["new"]])
        try observer.call("observe", ["pattern": "cut.cursor"])
        leaver.close()
        cluster.partitionFromNATS()
        let cut = Date()
        // A batch in flight from n3 that cannot be appended: its touch, stamped now.
        try toucher.send(raw: Array(#"{"op":"touch","id":1,"object":"cut.lease"}"#.utf8) + [0x0A])
        usleep(1_300_000)
        // n3 has been appending one batch for over a second: the session stays.
        let refused = try stayer.request("endSession")
        #expect(refused["error"]?["code"] == "unavailable", "\(refused)")
        // n1's touch, later and acknowledged: the deadline it promises must hold.
        let promised = try #require(try setup.call("touch", ["object": "cut.lease"])["expiresAt"]?.intValue)
        usleep(UInt32(max(0, 3.5 - Date().timeIntervalSince(cut)) * 1_000_000))
        cluster.healPartition()
        // The ended session's action and deletion run once each, after the heal.
        var heard: [JSONValue] = []
        let deadline = Date().addingTimeInterval(20)
        while heard.count < 2, Date() < deadline, let event = try observer.nextEvent(timeout: 20) {
            if event["event"] == "change", event["object"] == "cut.status" || event["object"] == "cut.cursor" { heard.append(event) }
        }
        heard += try observer.changeEvents(within: 1.5)
        #expect(heard.count == 2, "\(heard)")
        #expect(heard.contains { $0["object"] == "cut.status" && $0["change"]?["new"] == false }, "\(heard)")
        #expect(heard.contains { $0["object"] == "cut.cursor" && $0["reason"] == "sourceDeleted" }, "\(heard)")
        // The stayer's session stayed; ended now, its action runs once.
        let ended = try stayer.request("endSession", timeout: 15)
        #expect(ended["ran"] == 1, "\(ended)")
        let settled = Date().addingTimeInterval(15)
        while try setup.call("get", ["object": "cut.status", "keyPath": "stayer"])["value"] != "gone", Date() < settled { usleep(50_000) }
        let digests = try cluster.waitForConvergence(timeout: 30)
        #expect(Set(digests.map { $0["digest"]?.stringValue ?? "" }).count == 1, "\(digests)")
        for index in 0..<3 {
            let node = try cluster.connect(index)
            #expect(try node.call("get", ["object": "cut.status"])["value"] == ["online": false, "stayer": "gone"], "n\(index + 1)")
            let expiresAt = try node.call("get", ["object": "cut.lease"])["expiresAt"]?.intValue ?? 0
            #expect(expiresAt >= promised, "n\(index + 1): the lease ends at \(expiresAt), before the \(promised) n1's touch promised")
        }
    }
}
