import Foundation
import KVOClientKit
import KVOJSON
import Testing

/// Snapshots and trimming (docs/design.md, "Cluster", "Snapshots and trimming") with real processes: the
/// nodes snapshot every few stream entries (`--cluster-snapshot-every`) and trim the stream behind them; a
/// fourth node started later on an empty data directory cannot replay the stream from sequence 1 (it is
/// gone), so it installs the newest snapshot, consumes the tail and ends with the same digest, its observers
/// hearing what the others' hear. In the `cluster` suite so that it never runs beside another cluster.
extension ClusterTests {
    /// Flags every node of these tests gets: a snapshot every 10 stream entries.
    private static let snapshotFlags = ["--cluster-snapshot-every", "10"]

    /// The stream's first sequence as the NATS servers' monitoring endpoints report it (nil while none does).
    private func firstSequence(of cluster: LocalCluster) -> Int64? {
        for port in cluster.monitorPorts {
            guard let body = LocalCluster.httpGet(port: port, path: "/jsz?accounts=true&streams=true"),
                  let json = try? JSONParser.parse(Array(body.utf8)),
                  case let .array(accounts)? = json["account_details"]
            else { continue }
            for account in accounts {
                guard case let .array(streams)? = account["stream_detail"] else { continue }
                for detail in streams where detail["name"]?.stringValue == cluster.stream {
                    if let first = detail["state"]?["first_seq"]?.intValue { return first }
                }
            }
        }
        return nil
    }

    /// Waits until the stream was trimmed (its first sequence is past 1); returns the first sequence.
    private func waitForTrim(_ cluster: LocalCluster, timeout: Double = 20) throws -> Int64 {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let first = firstSequence(of: cluster), first > 1 { return first }
            guard Date() < deadline else { throw LocalClusterError.notReady("the stream was never trimmed") }
            usleep(100_000)
        }
    }

    /// A fourth node, `n4`, on an empty data directory, with the cluster's flags.
    private func startFourthNode(_ cluster: LocalCluster) throws -> KVODProcess {
        try KVODProcess(["--cluster", cluster.natsURLs, "--cluster-stream", cluster.stream, "--node", "n4"] + Self.snapshotFlags,
                        dataDirectory: cluster.directory.appending("kvod-4"))
    }

    /// Waits until `node` has applied what n1 has (nothing is written meanwhile); returns its digest reply.
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

    @Test("a new node joining a cluster whose stream was trimmed bootstraps from a snapshot and catches up")
    func newNodeBootstrapsFromSnapshot() throws {
        let cluster = try LocalCluster(label: "snapshot", kvodArguments: Self.snapshotFlags)
        try cluster.waitUntilReady()
        let writer = try cluster.nodes[0].connect()
        try writer.call("defineClass", ["class": try JSONParser.parse(Array(RandomOperationLog.itemClass.utf8))])
        try writer.call("create", ["object": "doc", "values": ["n": 0]])
        try writer.call("create", ["object": "item", "class": "Item", "values": ["level": 1]])
        try writer.call("create", ["object": "mirror", "values": ["n": 0]])
        let binding = try writer.call("bind", ["from": ["object": "doc", "keyPath": "n"], "to": ["object": "mirror", "keyPath": "n"]])
        for value in 1...40 {
            try writer.call("set", ["object": "doc", "keyPath": "n", "value": .int(Int64(value))])
        }
        let first = try waitForTrim(cluster)
        try cluster.waitForConvergence()

        let n4 = try startFourthNode(cluster)
        let joined = try waitForCatchUp(n4, with: cluster)
        let snapshot = try #require(joined["bootstrapSnapshot"]?.intValue, "n4 did not bootstrap from a snapshot: \(joined)")
        #expect(first > 1 && snapshot + 1 >= first, "the stream starts at \(first), the snapshot covers up to \(snapshot)")
        #expect(n4.log.contains("bootstrapping from the snapshot of stream sequence \(snapshot)"))
        #expect(n4.log.contains("subscribed to stream '\(cluster.stream)' from sequence \(snapshot + 1)"))

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
        #expect(revisions.count == 5)
        let second = try n4.connect().call("bind", ["from": ["object": "doc", "keyPath": "n"], "to": ["object": "mirror", "keyPath": "copy"]])
        #expect(second["binding"]?.intValue == (binding["binding"]?.intValue).map { $0 + 1 })

        let digests = try cluster.waitForConvergence() + [JSONValue.object(try n4.connect().call("digest"))]
        #expect(Set(digests.map { $0["digest"]?.stringValue ?? "" }).count == 1, "\(digests)")
        #expect(Set(digests.map { $0["applied"]?.intValue ?? -1 }).count == 1, "\(digests)")
        n4.stop(signal: SIGKILL)
    }
}
