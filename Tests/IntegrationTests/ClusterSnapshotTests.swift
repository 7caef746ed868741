import Foundation
import Synchronization
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Snapshots and trimming (docs/design.md, "Cluster", "Snapshots and trimming") with real processes: the
/// nodes snapshot every few stream entries (`--cluster-snapshot-every`) and trim the stream behind them; a
/// fourth node started later on an empty data directory cannot replay the stream from sequence 1 (it is
/// gone), so it installs the newest snapshot, consumes the tail and ends with the same digest, its observers
/// hearing what the others' hear. In the `cluster` suite so that it never runs beside another cluster.
extension ClusterTests {
    /// Flags every node of these tests gets: a snapshot every 10 stream entries.
    private static let snapshotFlags = ["--cluster-snapshot-every", "10"]


    /// Whether `node`'s log contains `text` within a few seconds.
    private func logEventually(_ node: KVODProcess, contains text: String) -> Bool {
        let deadline = Date().addingTimeInterval(5)
        while !node.log.contains(text) {
            guard Date() < deadline else { return false }
            usleep(20_000)
        }
        return true
    }

    /// A fourth node, `n4`, on an empty data directory, with the cluster's flags.
    private func startFourthNode(_ cluster: LocalCluster, flags: [String] = ClusterTests.snapshotFlags) throws -> KVODProcess {
        try KVODProcess(["--cluster", cluster.natsURLs, "--cluster-stream", cluster.stream, "--node", "n4"] + flags,
                        dataDirectory: cluster.directory.appending("kvod-4"))
    }

    /// Waits until `node` has applied what n1..n3 have (nothing is written meanwhile); returns its digest reply.
    @discardableResult
    private func waitForCatchUp(_ node: KVODProcess, with cluster: LocalCluster, timeout: Double = 20) throws -> JSONValue {
        let target = try cluster.waitForConvergence()[0]["applied"]?.intValue
        let client = try node.connect()
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let digest = JSONValue.object(try client.call("digest"))
            if digest["applied"]?.intValue == target { return digest }
            guard Date() < deadline else { throw LocalClusterError.notReady("n4 did not catch up: \(digest), n1 at \(target ?? -1)") }
            usleep(50_000)
        }
    }

    @Test("a node trimmed past and a new node joining bootstrap from a snapshot and catch up")
    func newNodeBootstrapsFromSnapshot() throws {
        let cluster = try LocalCluster(label: "snapshot", kvodArguments: Self.snapshotFlags)
        try cluster.waitUntilReady()
        let writer = try cluster.nodes[0].connect()
        try writer.call("defineClass", ["class": try JSONParser.parse(Array(RandomOperationLog.itemClass.utf8))])
        try writer.call("create", ["object": "doc", "values": ["n": 0]])
        try writer.call("create", ["object": "item", "class": "Item", "values": ["level": 1]])
        try writer.call("create", ["object": "mirror", "values": ["n": 0]])
        let binding = try writer.call("bind", ["from": ["object": "doc", "keyPath": "n"], "to": ["object": "mirror", "keyPath": "n"]])
        try cluster.waitForConvergence()
        // n3 goes down with what it applied so far; the stream is trimmed past it meanwhile.
        let n3Applied = try #require(JSONValue.object(try cluster.nodes[2].connect().call("digest"))["applied"]?.intValue)
        cluster.nodes[2].stop(signal: SIGKILL)
        for value in 1...40 {
            try writer.call("set", ["object": "doc", "keyPath": "n", "value": .int(Int64(value))])
        }
        let first = try cluster.waitForTrim()
        #expect(first > n3Applied + 1, "the stream starts at \(first), n3 had applied \(n3Applied)")
        // Restarted, n3 cannot replay from its own sequence: it replaces its state with a snapshot.
        try cluster.restart(2, after: SIGKILL)
        let restarted = try cluster.waitForConvergence()[2]
        #expect(restarted["bootstrapSnapshot"]?.intValue ?? 0 >= first - 1, "n3 did not install a snapshot: \(restarted)")

        let n4: KVODProcess
        do {
            n4 = try startFourthNode(cluster)
        } catch {
            for node in cluster.nodes { print(node.log.split(separator: "\n").filter { $0.contains("cluster:") }.joined(separator: "\n")) }
            throw error
        }
        let joined = try waitForCatchUp(n4, with: cluster)
        let snapshot = try #require(joined["bootstrapSnapshot"]?.intValue, "n4 did not bootstrap from a snapshot: \(joined)")
        print("snapshot: the stream starts at \(first); n4 bootstrapped from the snapshot of sequence \(snapshot), caught up to \(joined["applied"] ?? .null)")
        #expect(first > 1 && snapshot + 1 >= first, "the stream starts at \(first), the snapshot covers up to \(snapshot)")
        // The log is collected from the process's stderr asynchronously: wait for the line.
        #expect(logEventually(n4, contains: "bootstrapping from the snapshot of stream sequence \(snapshot)"), "\(n4.log)")

        // Later writes reach observers on n4 as on n1 with the same revisions; the binding (made before
        // the snapshot, its id counter with it) still runs on n4, and the next binding id is the same everywhere.
        let observers = try [cluster.nodes[0], n4].map { node in
            let observer = try node.connect()
            try observer.call("observe", ["object": "mirror", "keyPath": "n", "options": ["new", "old"]])
            return observer
        }
        let otherWriter = try cluster.nodes[1].connect()
        var revisions: [Int64] = []
        for value in 41...45 {
            let reply = try otherWriter.call("set", ["object": "doc", "keyPath": "n", "value": .int(Int64(value))])
            revisions.append(try #require(reply["rev"]?.intValue))
        }
        let seen = try observers.map { try $0.changeEvents(5, keeping: ["rev", "change"]) }
        #expect(seen[0].count == 5 && seen[1] == seen[0], "\(seen)")
        expectEqual(revisions.count, 5)
        let second = try n4.connect().call("bind", ["from": ["object": "doc", "keyPath": "n"], "to": ["object": "mirror", "keyPath": "copy"]])
        expectEqual(second["binding"]?.intValue, (binding["binding"]?.intValue).map { $0 + 1 })

        // An --in-memory node bootstraps the same way (its engine made from the snapshot, no store).
        let n5 = try KVODProcess(["--cluster", cluster.natsURLs, "--cluster-stream", cluster.stream, "--node", "n5"] + Self.snapshotFlags)
        let inMemory = try waitForCatchUp(n5, with: cluster)
        #expect(inMemory["bootstrapSnapshot"]?.intValue ?? 0 >= first - 1, "n5 did not install a snapshot: \(inMemory)")

        let digests = try cluster.waitForConvergence() + [JSONValue.object(try n4.connect().call("digest")), inMemory]
        expectEqual(Set(digests.map { $0["digest"]?.stringValue ?? "" }).count, 1, "\(digests)")
        expectEqual(Set(digests.map { $0["applied"]?.intValue ?? -1 }).count, 1, "\(digests)")
        n4.stop(signal: SIGKILL)
        n5.stop(signal: SIGKILL)
    }

    @Test("a random log: a node started mid-way from a snapshot ends with the same digest, its observers hear the same events")
    func randomLogWithNodeFromSnapshot() throws {
        let flags = ["--cluster-snapshot-every", "25"]
        // 1,200 operations by default; 10,000 with KVOD_LONG_TESTS=1, as the live determinism test.
        let count = ProcessInfo.processInfo.environment["KVOD_LONG_TESTS"] == "1" ? 10_000 : 1_200
        let log = RandomOperationLog(seed: 20_261_127, count: count)
        let half = log.operations.count / 2
        let cluster = try LocalCluster(label: "snapdeterminism", kvodArguments: flags)
        try cluster.waitUntilReady()
        let setup = try cluster.nodes[0].connect()
        try setup.call("defineClass", ["class": try JSONParser.parse(Array(RandomOperationLog.itemClass.utf8))])
        try setup.call("create", ["object": "end", "values": ["done": false]])
        var outcomes = try send(log.operations[..<half], toPorts: cluster.nodes.map(\.port))
        let first = try cluster.waitForTrim()

        // n4 joins between the halves, from the newest snapshot; then every node gets the same observer.
        let n4 = try startFourthNode(cluster, flags: flags)
        let joined = try waitForCatchUp(n4, with: cluster)
        let snapshot = try #require(joined["bootstrapSnapshot"]?.intValue, "n4 did not bootstrap from a snapshot: \(joined)")
        #expect(snapshot + 1 >= first && first > 1)
        let nodes = cluster.nodes + [n4]
        var observers: [(connection: KVOConnection, subs: [Int64: Int])] = []
        for node in nodes {
            let observer = try node.connect()
            var subs: [Int64: Int] = [:]
            for (index, subscription) in ClusterDeterminismSupport.subscriptions.enumerated() {
                subs[try #require(try observer.call("observe", subscription)["sub"]?.intValue)] = index
            }
            observers.append((observer, subs))
        }
        let second = try send(log.operations[half...], toPorts: nodes.map(\.port))
        outcomes.merge(second, uniquingKeysWith: +)
        print("snapshot determinism: stream from \(first), n4 from the snapshot of \(snapshot) (rev \(joined["rev"] ?? .null)); replies \(outcomes.sorted { $0.key < $1.key })")
        let expectedCodes: Set<String> = ["ok", "exists", "not_found", "invalid_value", "read_only", "out_of_range", "type_mismatch", "cycle", "conflict"]
        #expect(Set(outcomes.keys).isSubset(of: expectedCodes), "unexpected replies: \(outcomes)")
        expectEqual(outcomes.values.reduce(0, +), log.operations.count)

        // The sentinel: once an observer has its event, it has every earlier revision's.
        try setup.call("set", ["object": "end", "keyPath": "done", "value": true])
        let streams = try observers.map { try ClusterDeterminismSupport.eventsUntilSentinel($0.connection, subs: $0.subs) }
        for index in streams[0].indices {
            #expect(!streams[0][index].isEmpty, "subscription \(index) heard little: \(streams[0][index].count)")
            for node in 1..<streams.count where streams[node][index] != streams[0][index] {
                let difference = zip(streams[0][index], streams[node][index]).first { $0 != $1 }
                Issue.record("n\(node + 1)'s subscription \(index) differs from n1's (\(streams[node][index].count) vs \(streams[0][index].count) events; first difference \(String(describing: difference)))")
            }
        }
        let digests = try cluster.waitForConvergence() + [try waitForCatchUp(n4, with: cluster)]
        expectEqual(Set(digests.map { $0["digest"]?.stringValue ?? "" }).count, 1, "\(digests)")
        expectEqual(Set(digests.map { $0["rev"]?.intValue ?? -1 }).count, 1, "\(digests)")
        n4.stop(signal: SIGKILL)
    }

    /// Sends `operations` from two connections per port, dealt out round-robin; the replies' codes, counted.
    private func send(_ operations: ArraySlice<(op: String, params: [String: JSONValue])>, toPorts ports: [Int]) throws -> [String: Int] {
        let writers = ports.count * 2
        let counts = Mutex<[String: Int]>([:])
        let base = operations.startIndex
        DispatchQueue.concurrentPerform(iterations: writers) { writer in
            var local: [String: Int] = [:]
            do {
                let client = try KVOConnection(host: "127.0.0.1", port: ports[writer % ports.count])
                for index in stride(from: base + writer, to: operations.endIndex, by: writers) {
                    let (op, params) = operations[index]
                    let reply = try client.request(op, params, timeout: 30)
                    local[reply["ok"] == true ? "ok" : reply["error"]?["code"]?.stringValue ?? "\(reply)", default: 0] += 1
                }
            } catch {
                local["writer \(writer): \(error)", default: 0] += 1
            }
            counts.withLock { $0.merge(local, uniquingKeysWith: +) }
        }
        return counts.withLock { $0 }
    }
}
