import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Faults under load from many clients (docs/design.md, "Cluster"; `ClusterWriteLoad`): six clients,
/// two per node, half of them pipelining, append their own values to one array while a kvod node is
/// killed with SIGKILL (no acknowledged write lost; its observer resumes on another node with
/// `sinceRev`, missing and repeating nothing; the node restarts and matches), or while the NATS server
/// leading the stream is (writes pause, none lost or applied twice). In the `cluster` suite so that it
/// never runs beside another cluster.
extension ClusterTests {
    /// Six clients over the three nodes, every other one pipelining 4 writes; a client of a node that
    /// dies goes on on the next node of `ports`.
    private static func sixClients(_ ports: [Int], writes: Int) -> [ClusterWriteLoad.Client] {
        (0..<6).map { index in
            let home = index / 2
            return ClusterWriteLoad.Client(ports: (0..<3).map { ports[(home + $0) % 3] }, pipeline: index % 2 == 1 ? 4 : 1,
                                           writes: writes)
        }
    }

    @Test("SIGKILL of a kvod node under writes from six clients: no acknowledged write lost, its observer resumes elsewhere")
    func nodeKilledUnderLoad() throws {
        let cluster = try LocalCluster(label: "nodeload", kvodArguments: ["--cluster-write-timeout", "10"])
        try cluster.waitUntilReady()
        let setup = try cluster.nodes[0].connect()
        let base = try #require(try setup.call("create", ["object": "w", "values": ["log": []]])["rev"]?.intValue)
        for node in cluster.nodes { _ = try ClusterLoadSupport.log("w", on: node, atLeast: base) }
        // The reference observer stays on n2; the victim observes on n3, the node to be killed.
        let reference = try cluster.nodes[1].connect()
        try reference.call("observe", ["object": "w", "keyPath": "log", "options": ["new"]])
        let victim = try cluster.nodes[2].connect()
        try victim.call("observe", ["object": "w", "keyPath": "log", "options": ["new"]])

        let load = ClusterWriteLoad(clients: ClusterTests.sixClients(cluster.nodes.map(\.port), writes: 150), object: "w",
                                    keyPath: "log")
        load.start()
        #expect(load.waitForAcks(250), "the load did not get going: \(load.errors.prefix(3))")
        cluster.nodes[2].stop(signal: SIGKILL)
        let killedAt = load.ackCount
        // What the victim observer had received when its node died (whole lines; the connection then ends).
        var before: [String] = []
        do {
            while let event = try victim.nextEvent(timeout: 10) {
                guard event["event"] == "change" else { continue }
                before.append(JSONValue.object(["rev": event["rev"] ?? .null, "change": event["change"] ?? .null]).description)
            }
            Issue.record("the killed node's observer connection did not end")
        } catch {}
        let lastSeen = try before.last.map { try JSONParser.parse($0)["rev"]?.intValue ?? base } ?? base
        // It resumes on n1, from the last revision it saw (atLeastRev: n1 may be behind n3).
        let resumed = try cluster.nodes[0].connect()
        try resumed.call("observe", ["object": "w", "keyPath": "log", "options": ["new"], "sinceRev": .int(lastSeen),
                                     "atLeastRev": .int(lastSeen)], timeout: 30)
        #expect(load.wait(timeout: 90), "the writers did not finish")
        print("kvod n3 killed after \(killedAt) acknowledged writes; \(load.ackCount) acknowledged, \(load.unconfirmed.count) unconfirmed (\(load.errors.prefix(2))); its observer had \(before.count) changes, last rev \(lastSeen); \(load.reconnections)")
        #expect(load.problems.isEmpty, "\(load.problems)")
        #expect(load.reconnections.count >= 2, "n3's writers did not move: \(load.reconnections)")
        let acks = load.acknowledged
        expectEqual(Set(acks.map(\.rev)).count, acks.count, "two acknowledged writes share a revision")
        let lastAck = acks.map(\.rev).max() ?? base

        // No acknowledged write lost on the surviving nodes.
        for index in 0..<2 {
            ClusterLoadSupport.expectLogHolds(try ClusterLoadSupport.log("w", on: cluster.nodes[index], atLeast: lastAck),
                                              load, on: "n\(index + 1)")
        }
        // The killed node restarts, catches up and matches.
        try cluster.restart(2, after: SIGKILL)
        let digests = try cluster.waitForConvergence(timeout: 30)
        expectEqual(Set(digests.map { $0["digest"]?.stringValue ?? "" }).count, 1, "\(digests)")
        let final = try ClusterLoadSupport.log("w", on: cluster.nodes[2], atLeast: lastAck)
        ClusterLoadSupport.expectLogHolds(final, load, on: "n3 restarted")

        // One change per applied insert: the reference saw them all; the victim's changes and then the
        // resumed ones are exactly those, none missed or repeated.
        let all = try reference.changeEvents(final.count, keeping: ["rev", "change"])
        let after = try resumed.changeEvents(final.count - before.count, keeping: ["rev", "change"])
        expectEqual(all.count, final.count)
        expectEqual(before + after, all, "the observer resumed on n1 missed or repeated a change (\(before.count) + \(after.count) of \(all.count))")
    }

    @Test("SIGKILL of the stream leader's NATS server under writes from six clients: a pause, nothing lost or applied twice")
    func streamLeaderKilledUnderLoad() throws {
        let cluster = try LocalCluster(label: "leaderload", kvodArguments: ["--cluster-write-timeout", "20"])
        try cluster.waitUntilReady()
        let setup = try cluster.nodes[0].connect()
        let base = try #require(try setup.call("create", ["object": "w", "values": ["log": []]])["rev"]?.intValue)
        for node in cluster.nodes { _ = try ClusterLoadSupport.log("w", on: node, atLeast: base) }
        let observers = try cluster.nodes.map { node in
            let observer = try node.connect()
            try observer.call("observe", ["object": "w", "keyPath": "log.@count", "options": ["new"]])
            return observer
        }
        let leader = try #require(cluster.waitForStreamLeader(), "no NATS server reports a leader for the stream")
        let load = ClusterWriteLoad(clients: ClusterTests.sixClients(cluster.nodes.map(\.port), writes: 120), object: "w",
                                    keyPath: "log")
        let started = monotonicSeconds()
        load.start()
        #expect(load.waitForAcks(200), "the load did not get going: \(load.errors.prefix(3))")
        cluster.killNATS(leader)
        let killedAt = (load.ackCount, monotonicSeconds() - started)
        #expect(load.wait(timeout: 90), "the writers did not finish")
        let pause = load.longestPause
        print("stream leader nats-\(leader + 1) killed after \(killedAt.0) of \(load.sentValues.count) writes (\(String(format: "%.2f", killedAt.1)) s in): longest pause between acknowledgements \(String(format: "%.3f", pause.seconds)) s, ending \(String(format: "%.2f", pause.endingAfter)) s after the first; new leader \(cluster.streamLeader().map { "nats-\($0 + 1)" } ?? "unknown")")
        #expect(load.problems.isEmpty, "\(load.problems)")
        #expect(load.errors.isEmpty, "writes failed: \(load.errors.prefix(5))")
        let acks = load.acknowledged
        expectEqual(acks.count, load.sentValues.count)
        // One revision per write, each once: a write applied twice would take a revision of its own.
        let revisions = acks.map(\.rev).sorted()
        expectEqual(revisions, Array((base + 1)...(base + Int64(load.sentValues.count))), "revisions skip or repeat")
        let digests = try cluster.waitForConvergence(timeout: 30)
        expectEqual(Set(digests.map { $0["digest"]?.stringValue ?? "" }).count, 1, "\(digests)")
        for (index, node) in cluster.nodes.enumerated() {
            let log = try ClusterLoadSupport.log("w", on: node, atLeast: revisions.last ?? base)
            expectEqual(log.count, load.sentValues.count, "n\(index + 1): \(log.count) values")
            ClusterLoadSupport.expectLogHolds(log, load, on: "n\(index + 1)")
        }
        // Every observer heard every count once, in order.
        for (index, observer) in observers.enumerated() {
            var counts: [Int64] = []
            while counts.count < acks.count, let event = try observer.nextEvent(timeout: 20) {
                if let count = event["change"]?["new"]?.intValue { counts.append(count) }
            }
            expectEqual(counts, Array(1...Int64(acks.count)), "n\(index + 1)'s observer: \(counts.count) events")
        }
    }
}

/// Helpers of the load tests.
private enum ClusterLoadSupport {
    /// The array `log` of `object` on `node`, once the node has applied revision `atLeast`.
    static func log(_ object: String, on node: KVODProcess, atLeast: Int64) throws -> [String] {
        let reply = try node.connect().call("get", ["object": .string(object), "keyPath": "log", "atLeastRev": .int(atLeast)],
                                            timeout: 30)
        guard case let .array(items)? = reply["value"] else { return [] }
        return items.compactMap(\.stringValue)
    }

    /// Checks an array written by `load`: every acknowledged value in it, nothing twice, nothing never
    /// sent, each client's values in the order it wrote them.
    static func expectLogHolds(_ log: [String], _ load: ClusterWriteLoad, on what: String) {
        let present = Set(log)
        expectEqual(present.count, log.count, "\(what): \(log.count - present.count) values appear twice")
        let missing = load.acknowledged.map(\.value).filter { !present.contains($0) }
        #expect(missing.isEmpty, "\(what): acknowledged writes lost: \(missing.prefix(10))")
        let strangers = present.subtracting(load.sentValues)
        #expect(strangers.isEmpty, "\(what): values nobody sent: \(strangers.prefix(10))")
        for client in load.clients.indices {
            let prefix = "c\(client)-"
            let numbers = log.filter { $0.hasPrefix(prefix) }.compactMap { Int($0.dropFirst(prefix.count)) }
            expectEqual(numbers, numbers.sorted(), "\(what): client \(client)'s writes were applied out of order")
        }
    }
}
