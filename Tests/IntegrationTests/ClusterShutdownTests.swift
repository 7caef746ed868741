import Foundation
import KVOWireProbe
import Testing

/// A cluster node that cannot reach any NATS server still stops promptly on SIGTERM: its NATS bridge
/// connects asynchronously and `stop` closes the connection, ending any NATS call the bridge waits in
/// (before, the first connect blocked for ever and the node never stopped: 10 s, then SIGKILL, in the
/// tests). The real binary against a port nobody listens on; no NATS server is needed.
@Suite("cluster shutdown")
struct ClusterShutdownTests {
    @Test("a cluster node whose NATS servers are unreachable exits within 5 s of SIGTERM", arguments: [0.3, 2.5])
    func stopsWithoutNATS(after seconds: Double) throws {
        let scratch = try TemporaryDirectory("cluster-stop")
        let closed = try LocalCluster.freePort()
        let node = try KVODProcess(["--cluster", "nats://127.0.0.1:\(closed)", "--cluster-stream", "s", "--node", "n1"],
                                   dataDirectory: scratch.appending("node"))
        // Reads are served meanwhile: the loop thread is not blocked by the bridge.
        #expect(try node.connect().call("list")["objects"] == [])
        usleep(UInt32(seconds * 1_000_000))
        let started = Date()
        let status = node.stop(signal: SIGTERM, timeout: 10)
        let took = Date().timeIntervalSince(started)
        print("cluster node without NATS: SIGTERM after \(seconds) s, exited in \(String(format: "%.3f", took)) s, status \(status)")
        // A liveness bound with more than 2x margin over the 1-2 s aimed at (stop() answers -1 after a SIGKILL).
        #expect(status == 0, "exit status \(status): \(node.log.suffix(2000))")
        #expect(took < 5, "took \(took) s to stop")
    }
}
