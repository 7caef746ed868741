import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Signals in a cluster (docs/protocol.md, "Signals"): sent on one node, heard by every node's observers through a
/// NATS core subject, not the stream: no revision taken, the digests unchanged. In the `cluster` suite so that it
/// never runs beside another; short (one cluster, a few signals).
extension ClusterTests {
    @Test("a signal sent on one node reaches the observers on every node, once, with nothing appended to the stream")
    func signalsReachEveryNode() throws {
        let cluster = try LocalCluster(label: "signals")
        try cluster.waitUntilReady()
        let sender = try cluster.connect(0)
        let rev = try sender.call("create", ["object": "room", "values": ["n": 1]])["rev"] ?? 0
        let observers = try (0..<3).map { index -> KVOConnection in
            let connection = try cluster.connect(index)
            try connection.call("observe", ["object": "room", "keyPath": "n", "atLeastRev": rev])
            return connection
        }
        let pattern = try cluster.connect(2)
        try pattern.call("observe", ["pattern": "ro*"])
        let before = try cluster.waitForConvergence(timeout: 30)
        for index in 0..<5 { try sender.call("signal", ["object": "room", "value": ["i": .int(Int64(index))]]) }
        for (node, observer) in (observers + [pattern]).enumerated() {
            var heard: [JSONValue] = []
            while heard.count < 5, let event = try observer.nextEvent(timeout: 10) { heard.append(event) }
            // Nothing twice (a node's own signals come back from NATS and are skipped).
            while let event = try observer.nextEvent(timeout: 0.5) { heard.append(event) }
            #expect(heard.map { $0["change"]?["new"]?["i"] } == (0..<5).map { JSONValue.int(Int64($0)) },
                    "observer \(node): in order, once each: \(heard)")
            #expect(heard.allSatisfy { $0["reason"] == "signal" && $0["object"] == "room" && $0["rev"] == rev }, "\(heard)")
        }
        // No revision, nothing in the stream: the digests are those of before.
        let after = try cluster.waitForConvergence(timeout: 30)
        #expect(after.map { $0["digest"] } == before.map { $0["digest"] } && after.map { $0["rev"] } == before.map { $0["rev"] },
                "\(before) \(after)")
        // Unknown on the sender's node: refused there, nothing relayed.
        #expect(try sender.request("signal", ["object": "ghost", "value": 1])["error"]?["code"] == "not_found")
        #expect(try observers[1].nextEvent(timeout: 0.5) == nil)
    }
}
