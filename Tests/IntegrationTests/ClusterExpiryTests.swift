import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Expiry in a cluster (docs/protocol.md, "Expiry"; docs/design.md, "Expiry"): deadlines come from the write
/// time stamped in the stream, every node that finds an object due submits `expire`, the first in the stream
/// deletes it and the others are refused alike. Killing the node that wrote (and that found it due and decided
/// first) right after the deadline changes nothing: the others expire it, every observer hears the same
/// `sourceDeleted` with `"cause":"expired"` at the same revision, and the digests agree, the killed node's too
/// after its restart; with users defined, since the server's `expire` is nobody's write. In the `cluster` suite
/// so that it never runs beside another cluster.
extension ClusterTests {
    @Test("a ttl on a three-node cluster: expired once at the same revision everywhere, the deciding node killed")
    func expiryWithTheDecidingNodeKilled() throws {
        // With users: the server's own `expire` travels as no user's write and is admitted on every node.
        let cluster = try LocalCluster(label: "ttl", admin: (user: "root", password: "root-pw"))
        try cluster.waitUntilReady()
        let observers = try (1...2).map { index -> KVOConnection in
            let connection = try cluster.connect(index)
            try connection.call("observe", ["pattern": "sess:*"])
            return connection
        }
        let writer = try cluster.connect(0)
        try writer.call("create", ["object": "sess:kept", "values": [:], "ttl": 3600])
        let created = Date()
        try writer.call("create", ["object": "sess:1", "values": ["user": "ada"], "ttl": 1])
        // n1 finds it due at about the same time as the others and submits its `expire`: killed right then.
        // Time: the 1 s TTL runs on the real nodes' clocks.
        usleep(1_150_000)
        cluster.nodes[0].send(signal: SIGKILL)
        var endings: [JSONValue] = []
        for observer in observers {
            while let event = try observer.nextEvent(timeout: 10) {
                guard event["reason"] == "sourceDeleted" else { continue }
                endings.append(event)
                break
            }
        }
        expectEqual(endings.count, 2, "\(endings)")
        #expect(endings.allSatisfy { $0["object"] == "sess:1" && $0["cause"] == "expired" }, "\(endings)")
        expectEqual(Set(endings.map { $0["rev"]?.intValue ?? -1 }).count, 1, "the same revision everywhere: \(endings)")
        let took = Date().timeIntervalSince(created)
        #expect(took < 10, "expired after \(took) s")
        // No second expiry: the later `expire`s (n1's, if it got into the stream, and the slower node's) were refused.
        for observer in observers { #expect(try observer.nextEvent(timeout: 1.5) == nil) }
        try cluster.restart(0, after: SIGKILL)
        let digests = try cluster.waitForConvergence(timeout: 30)
        expectEqual(Set(digests.map { $0["digest"]?.stringValue ?? "" }).count, 1, "\(digests)")
        for index in 0..<3 {
            expectEqual(try cluster.connect(index).call("list")["objects"], ["ready", "sess:kept"], "n\(index + 1)")
            let kept = try cluster.connect(index).call("touch", ["object": "sess:kept"])
            #expect(kept["expiresAt"]?.intValue != nil, "n\(index + 1): \(kept)")
        }
    }
}
