import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// A cluster node's data directory holds the state of one stream: kvod refuses, at start-up and before it
/// reaches NATS, to start a single node's data as a cluster node, a cluster node's data alone, or one
/// stream's node in another stream's cluster (each would diverge from the other nodes unnoticed). The real
/// binary; no NATS server is needed, since the check comes first.
@Suite("cluster data directories")
struct ClusterDataDirectoryTests {
    private func clusterFlags(stream: String) -> [String] {
        ["--cluster", "nats://127.0.0.1:1", "--cluster-stream", stream, "--node", "n1"]
    }

    private func refusal(_ arguments: [String], data: String) -> String? {
        let error = #expect(throws: KVODProcessError.self) { _ = try KVODProcess(arguments, dataDirectory: data) }
        guard case let .exitedEarly(status, log) = error else { return nil }
        expectEqual(status, 1, "\(log)")
        return log
    }

    @Test("a single node's data is refused as a cluster node; a node's directory is refused alone and in another stream")
    func directoriesKeepTheirStream() throws {
        let scratch = try TemporaryDirectory("cluster-data")
        let single = scratch.appending("single")
        let server = try KVODProcess(dataDirectory: single)
        try server.connect().call("create", ["object": "o"])
        expectEqual(server.stop(), 0)
        let log = refusal(clusterFlags(stream: "s1"), data: single)
        expectEqual(log?.contains("holds data written outside cluster mode (revision 1)"), true, "\(log ?? "")")
        // Still a good single-node directory: nothing was written to it.
        let again = try KVODProcess(dataDirectory: single)
        expectEqual(try again.connect().call("list")["objects"], ["o"])
        expectEqual(again.stop(), 0)

        // An empty directory becomes stream s1's when a node of s1 starts on it.
        let node = scratch.appending("node")
        let member = try KVODProcess(clusterFlags(stream: "s1"), dataDirectory: node)
        _ = member.stop(signal: SIGKILL)  // the mark is written when the node starts, before any NATS call
        let alone = refusal([], data: node)
        expectEqual(alone?.contains("the data directory belongs to cluster stream 's1': start it with --cluster"), true, "\(alone ?? "")")
        let other = refusal(clusterFlags(stream: "s2"), data: node)
        expectEqual(other?.contains("belongs to cluster stream 's1', not 's2'"), true, "\(other ?? "")")
        // Its own stream is accepted again.
        let back = try KVODProcess(clusterFlags(stream: "s1"), dataDirectory: node)
        _ = back.stop(signal: SIGKILL)
    }
}
