import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Determinism of the cluster (docs/design.md, "Cluster", "Determinism"): a seeded random log of writes
/// (`RandomOperationLog`: creates, nested sets, array operations, deletes, a validated class whose
/// refusals and computed properties must come out alike, bindings made, triggered and removed) sent from six connections, two per node, while
/// an observer on every node follows the objects through pattern observations. Every node must deliver
/// each subscription the same events (same revisions, changes, refusals leaving no trace) and end with the
/// same digest; then two fresh processes (one with a store, one in memory) replay the whole log from the
/// stream and reach the same digest. 800 operations by default (every operation kind, class and subscription comes up several times in them: enough
/// for the point, at about a third of the time 2,000 took); 10,000 with `KVOD_LONG_TESTS=1`. In the `cluster` suite so
/// that it never runs beside another cluster.
extension ClusterTests {
    @Test("a random log from six connections on three nodes: every node's observers see the same events, equal digests")
    func randomLogIsDeterministic() throws {
        let count = ProcessInfo.processInfo.environment["KVOD_LONG_TESTS"] == "1" ? 10_000 : 800
        let log = RandomOperationLog(seed: 20_261_126, count: count)
        let cluster = try LocalCluster(label: "determinism")
        try cluster.waitUntilReady()
        let setup = try cluster.nodes[0].connect()
        try setup.call("defineClass", ["class": try JSONParser.parse(Array(RandomOperationLog.itemClass.utf8))])
        try setup.call("create", ["object": "end", "values": ["done": false]])
        try cluster.waitForConvergence()
        // One observer per node, the same subscriptions in the same order (sub ids are per node: by index).
        var observers: [(connection: KVOConnection, subs: [Int64: Int])] = []
        for node in cluster.nodes {
            let observer = try node.connect()
            var subs: [Int64: Int] = [:]
            for (index, subscription) in ClusterDeterminismSupport.subscriptions.enumerated() {
                subs[try #require(try observer.call("observe", subscription)["sub"]?.intValue)] = index
            }
            observers.append((observer, subs))
        }
        // Two writers per node, the log dealt out round-robin.
        let ports = cluster.nodes.map(\.port)
        let outcomes = OutcomeCounter()
        let started = Date()
        DispatchQueue.concurrentPerform(iterations: 6) { writer in
            do {
                let client = try KVOConnection(host: "127.0.0.1", port: ports[writer % 3])
                for index in stride(from: writer, to: log.operations.count, by: 6) {
                    let (op, params) = log.operations[index]
                    let reply = try client.request(op, params, timeout: 30)
                    outcomes.add(reply["ok"] == true ? "ok" : reply["error"]?["code"]?.stringValue ?? "\(reply)")
                }
            } catch {
                outcomes.add("writer \(writer): \(error)")
            }
        }
        let seconds = Date().timeIntervalSince(started)
        print("determinism: \(count) operations in \(String(format: "%.1f", seconds)) s: \(outcomes.all.sorted { $0.key < $1.key })")
        let counted = outcomes.all
        let expectedCodes: Set<String> = ["ok", "exists", "not_found", "invalid_value", "read_only", "out_of_range", "type_mismatch", "cycle",
                                          "conflict"]
        #expect(Set(counted.keys).isSubset(of: expectedCodes), "unexpected replies: \(counted)")
        expectEqual(counted.values.reduce(0, +), count)
        #expect((counted["ok"] ?? 0) > count / 3, "\(counted)")
        #expect((counted["invalid_value"] ?? 0) > 0 && (counted["read_only"] ?? 0) > 0, "the class refused nothing: \(counted)")
        #expect((counted["conflict"] ?? 0) > 0, "no condition failed: \(counted)")
        // The sentinel: once an observer has its event, it has every earlier revision's.
        try setup.call("set", ["object": "end", "keyPath": "done", "value": true])
        let endIndex = ClusterDeterminismSupport.subscriptions.count - 1
        let streams = try observers.map { try ClusterDeterminismSupport.eventsUntilSentinel($0.connection, subs: $0.subs) }
        for index in streams[0].indices {
            #expect(streams[0][index].count > (index == endIndex ? 0 : 10), "subscription \(index) heard little: \(streams[0][index].count)")
            for node in 1..<3 where streams[node][index] != streams[0][index] {
                let first = zip(streams[0][index], streams[node][index]).first { $0 != $1 }
                Issue.record("n\(node + 1)'s subscription \(index) differs from n1's (\(streams[node][index].count) vs \(streams[0][index].count) events; first difference \(String(describing: first)))")
            }
        }
        var digests = try cluster.waitForConvergence()
        expectEqual(Set(digests.map { $0["digest"]?.stringValue ?? "" }).count, 1, "\(digests)")
        expectEqual(Set(digests.map { $0["rev"]?.intValue ?? -1 }).count, 1, "\(digests)")

        // Two fresh processes, one with a store and one in memory, replay the whole log from the stream
        // (no snapshot: fewer entries than --cluster-snapshot-every) and reach the same state.
        let target = digests[0]
        for (name, storage) in [("n4", KVODProcess.Storage.directory(cluster.directory.appending("kvod-4"))), ("n5", .inMemory)] {
            let fresh = try KVODProcess(["--cluster", cluster.natsURLs, "--cluster-stream", cluster.stream, "--node", name],
                                        storage: storage)
            defer { fresh.stop(signal: SIGKILL) }
            let client = try fresh.connect()
            let deadline = Date().addingTimeInterval(30)
            var digest: JSONValue = .null
            while digest["applied"] != target["applied"], Date() < deadline {
                digest = .object(try client.call("digest"))
                usleep(50_000)
            }
            expectEqual(digest["bootstrapSnapshot"], nil, "\(name) replays the log: \(digest)")
            #expect(digest["digest"] == target["digest"] && digest["rev"] == target["rev"], "\(name): \(digest) against \(target)")
            digests.append(digest)
        }
        print("determinism: n4 (store) and n5 (in memory) replayed \(target["applied"] ?? .null) entries to digest \(target["digest"] ?? .null)")
    }
}

/// The observer's subscriptions: pattern observations (present and future objects) plus the sentinel.
enum ClusterDeterminismSupport {
    static let subscriptions: [[String: JSONValue]] = [
        ["pattern": "o*"],
        ["pattern": "o*", "keyPath": "a.b", "options": ["new", "old"]],
        ["pattern": "o*", "keyPath": "list", "options": ["new", "old"]],
        ["pattern": "o*", "keyPath": "a.c", "options": ["new", "old"]],
        ["pattern": "o*", "keyPath": "bound", "options": ["new", "old"]],
        ["pattern": "o*", "keyPath": "combined", "options": ["new"]],
        ["pattern": "c*"],
        ["pattern": "c*", "keyPath": "level", "options": ["new", "old"]],
        ["pattern": "c*", "keyPath": "double", "options": ["new", "old"]],
        ["pattern": "c*", "keyPath": "tags", "options": ["new", "old"]],
        ["pattern": "c*", "keyPath": "tagCount", "options": ["new"]],
        ["object": "end", "keyPath": "done", "options": ["new"]],
    ]

    /// An observer's events by subscription index (`subs`: sub id to index), each without its per-node
    /// `sub`, as compact JSON, up to and including the sentinel's (the last subscription): once it has that
    /// event, it has every earlier revision's.
    static func eventsUntilSentinel(_ connection: KVOConnection, subs: [Int64: Int]) throws -> [[String]] {
        var perSubscription = [[String]](repeating: [], count: subscriptions.count)
        while true {
            guard let event = try connection.nextEvent(timeout: 30) else {
                Issue.record("an observer stopped hearing events before the sentinel")
                return perSubscription
            }
            guard let sub = event["sub"]?.intValue, let index = subs[sub], var fields = event.objectValue else { continue }
            fields["sub"] = nil
            perSubscription[index].append(JSONValue.object(fields).description)
            if index == subscriptions.count - 1 { return perSubscription }
        }
    }
}
