import Foundation
import KVOWireProbe
import KVOJSON
import Testing
@testable import KVOServer
@testable import KVOTestSupport

/// The stream's integrity checks over real nats-server and kvod processes (docs/design.md, "Integrity of
/// the stream"), with entries written into the stream by the test itself, as a NATS replica that misbehaved
/// would deliver them: a batch present twice at two sequences (skipped by its identity everywhere), batches
/// of a publisher missing (every node halts, consumes again, and applies past a gap the stream itself has),
/// and a node whose running hash is a minority's (it stops taking writes, says why, installs a snapshot in
/// place and converges). In the `cluster` suite so that it never runs beside another cluster.
extension ClusterTests {
    /// A JetStream connection of the test's own to the cluster's NATS servers.
    static func session(_ cluster: LocalCluster) throws -> JetStreamSession {
        try JetStreamSession(servers: cluster.natsPorts.map { "nats://127.0.0.1:\($0)" }, timeoutMilliseconds: 3000,
                             persistent: false)
    }

    /// Every entry of the log stream, by sequence.
    static func entries(_ session: JetStreamSession, _ cluster: LocalCluster) throws -> [(UInt64, ReplicationEntry)] {
        guard let bounds = try session.streamBounds(cluster.stream), bounds.first <= bounds.last else { return [] }
        return try (bounds.first...bounds.last).compactMap { sequence in
            try session.message(cluster.stream, sequence: sequence).flatMap { try? ReplicationEntry.decode($0) }.map { (sequence, $0) }
        }
    }

    static func subject(_ cluster: LocalCluster) -> String { "kvod.\(cluster.stream).log" }

    @Test("a batch present twice at two sequences is skipped by its identity on every node: nothing applied twice")
    func duplicateEntrySkipped() throws {
        let cluster = try LocalCluster(label: "dup", kvodArguments: ["--cluster-checkpoint-every", "16", "--http-port", "0"])
        try cluster.waitUntilReady()
        let writer = try cluster.connect(0)
        try writer.call("create", ["object": "w", "values": ["log": []]])
        for value in 1...5 { try writer.call("insert", ["object": "w", "keyPath": "log", "value": .int(Int64(value))]) }
        let session = try Self.session(cluster)
        defer { session.close() }
        let (_, inserted) = try #require(try Self.entries(session, cluster).last { entry in
            entry.1.operations.contains { String(decoding: $0.line, as: UTF8.self).contains(#""value":3"#) }
        })
        // The same bytes again under another message id: JetStream keeps both.
        _ = try session.publish(Self.subject(cluster), inserted.encoded(), messageID: "test-duplicate", maxWaitMilliseconds: 3000)
        try writer.call("insert", ["object": "w", "keyPath": "log", "value": 6])
        let digests = try cluster.waitForConvergence()
        expectEqual(Set(digests.map { $0["digest"]?.stringValue ?? "" }).count, 1, "\(digests)")
        expectEqual(Set(digests.map { $0["chain"]?.stringValue ?? "" }).count, 1, "\(digests)")
        #expect(digests.allSatisfy { $0["integrity"] == "applying" }, "\(digests)")
        for (index, node) in cluster.nodes.enumerated() {
            #expect(node.waitForLog("is batch \(inserted.batch) again"), "n\(index + 1) did not say it skipped the duplicate")
            let log = try cluster.connect(index).call("get", ["object": "w", "keyPath": "log"])["value"]
            expectEqual(log, .array((1...6).map { .int(Int64($0)) }), "n\(index + 1): \(String(describing: log))")
            let metrics = LocalCluster.httpGet(port: node.httpPort, path: "/metrics") ?? ""
            #expect(metrics.contains("kvod_cluster_duplicates_skipped_total 1") && metrics.contains("kvod_cluster_integrity_state 0"),
                    "n\(index + 1): \(metrics.suffix(1200))")
        }
    }

    @Test("batches of a publisher missing from the stream: every node halts and consumes again, then applies past the stream's own gap alike")
    func missingBatchesDetected() throws {
        let cluster = try LocalCluster(label: "gap", kvodArguments: ["--cluster-checkpoint-every", "16"])
        try cluster.waitUntilReady()
        let session = try Self.session(cluster)
        defer { session.close() }
        func forged(_ counter: UInt64, _ object: String) -> [UInt8] {
            ReplicationEntry(version: 3, node: "zz", batch: "zz.forged.\(counter)",
                             operations: [.init(line: Array(#"{"op":"create","object":"\#(object)"}"#.utf8), user: nil)],
                             publisherSequence: counter).encoded()
        }
        _ = try session.publish(Self.subject(cluster), forged(1, "g1"), messageID: "zz.forged.1", maxWaitMilliseconds: 3000)
        _ = try session.publish(Self.subject(cluster), forged(3, "g3"), messageID: "zz.forged.3", maxWaitMilliseconds: 3000)
        for (index, node) in cluster.nodes.enumerated() {
            #expect(node.waitForLog("1 missing", timeout: 10), "n\(index + 1) did not notice the gap")
            #expect(node.waitForLog("the stream lost those batches", timeout: 20), "n\(index + 1) never applied past it:\n\(node.log.suffix(2000))")
        }
        let writer = try cluster.connect(1)
        let reply = try writer.request("create", ["object": "after"], timeout: 10)
        expectEqual(reply["ok"], true, "\(reply)")
        let digests = try cluster.waitForConvergence()
        expectEqual(Set(digests.map { $0["digest"]?.stringValue ?? "" }).count, 1, "\(digests)")
        for index in cluster.nodes.indices {
            expectEqual(try cluster.connect(index).request("get", ["object": "g3"])["ok"], true)
        }
    }

    @Test("a node whose running hash is the minority's stops taking writes, says why, installs a snapshot in place and converges")
    func minorityNodeRebootstraps() throws {
        let cluster = try LocalCluster(label: "minority", kvodArguments: ["--cluster-checkpoint-every", "16",
                                                                         "--cluster-snapshot-every", "64", "--http-port", "0"])
        try cluster.waitUntilReady()
        let writer = try cluster.connect(0)
        var value = 0
        func write(until sequence: Int64) throws {
            while (try cluster.connect(0).call("digest")["applied"]?.intValue ?? 0) < sequence {
                value += 1
                try writer.call("set", ["object": "ready", "keyPath": "n", "value": .int(Int64(value))])
            }
        }
        try write(until: 20)
        let session = try Self.session(cluster)
        defer { session.close() }
        // n1's and n2's claims for sequence 16 replaced by forged ones: for n3, the majority now has another hash.
        let forgedHash = String(repeating: "e", count: 64)
        for node in ["n1", "n2"] {
            var claim = ReplicationEntry(version: 3, node: node, batch: "forged.\(node)", operations: [])
            claim.checkpoint = .init(sequence: 16, hash: forgedHash)
            _ = try session.publish(Self.subject(cluster), claim.encoded(), messageID: "forged.\(node)", maxWaitMilliseconds: 3000)
        }
        #expect(cluster.nodes[2].waitForLog("diverged: its running hash after stream sequence 16", timeout: 10),
                "n3 did not notice:\n\(cluster.nodes[2].log.suffix(2000))")
        let refused = try cluster.nodes[2].connect().request("create", ["object": "on-n3"], timeout: 10)
        expectEqual(refused["error"]?["code"], "unavailable", "\(refused)")
        expectEqual(refused["error"]?["message"]?.stringValue?.contains("diverged"), true, "\(refused)")
        let status = try cluster.nodes[2].connect().call("digest")
        expectEqual(status["integrity"]?.stringValue?.hasPrefix("diverged"), true, "\(status)")
        // Not ready, and why; the metrics say so too. The majority nodes stay ready.
        let readiness = LocalCluster.httpGet(port: cluster.nodes[2].httpPort, path: "/readyz") ?? ""
        #expect(readiness.hasPrefix("diverged: its running hash after stream sequence 16"), "\(readiness)")
        let metrics = LocalCluster.httpGet(port: cluster.nodes[2].httpPort, path: "/metrics") ?? ""
        #expect(metrics.contains("kvod_cluster_integrity_state 2"), "\(metrics.suffix(1500))")
        #expect(metrics.contains("kvod_cluster_integrity_failures_total 1"), "\(metrics.suffix(1500))")
        #expect(metrics.contains("kvod_cluster_checkpoint_disagreements_total"), "\(metrics.suffix(1500))")
        expectEqual(LocalCluster.httpGet(port: cluster.nodes[0].httpPort, path: "/readyz"), "ready\n")
        // What operators see of the other nodes (`digest`'s `peers`, the inspector's nodes view): n1 heard
        // n2's forged claim last, and says it does not agree with its own chain there.
        let heard = try cluster.connect(0).call("digest")["peers"]?.arrayValue ?? []
        let n2 = heard.first { $0["node"] == "n2" }
        #expect(n2?["applied"] == 16 && n2?["chain"] == .string(forgedHash) && n2?["agrees"] == false, "\(heard)")
        // n1 and n2 heard one forged claim each, against two agreeing hashes: they go on.
        try write(until: 70)
        #expect(cluster.nodes[2].waitForLog("in place", timeout: 20), "n3 did not install the snapshot of 64:\n\(cluster.nodes[2].log.suffix(2000))")
        try writer.call("set", ["object": "ready", "keyPath": "n", "value": -1])
        let digests = try cluster.waitForConvergence(timeout: 20)
        expectEqual(Set(digests.map { $0["digest"]?.stringValue ?? "" }).count, 1, "\(digests)")
        #expect(digests.allSatisfy { $0["integrity"] == "applying" }, "\(digests)")
        let accepted = try cluster.nodes[2].connect().request("create", ["object": "on-n3"], timeout: 10)
        expectEqual(accepted["ok"], true, "\(accepted)")
        expectEqual(LocalCluster.httpGet(port: cluster.nodes[2].httpPort, path: "/readyz"), "ready\n")
        let healed = LocalCluster.httpGet(port: cluster.nodes[2].httpPort, path: "/metrics") ?? ""
        #expect(healed.contains("kvod_cluster_integrity_state 0") && healed.contains("kvod_cluster_rebootstraps_total 1"), "\(healed.suffix(1500))")
        for node in cluster.nodes[0...1] { #expect(!node.log.contains("diverged"), "a majority node diverged:\n\(node.log.suffix(1500))") }
        // Later checkpoints are real again: n1 sees n2 at 64 agreeing, with the revision n2 had there.
        let n1 = try cluster.connect(0).call("digest")
        let later = (n1["peers"]?.arrayValue ?? []).first { $0["node"] == "n2" }
        #expect(later?["applied"] == 64 && later?["agrees"] == true && later?["rev"]?.intValue != nil, "\(n1)")
    }
}
