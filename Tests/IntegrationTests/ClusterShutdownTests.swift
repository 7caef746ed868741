import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

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
        expectEqual(try node.connect().call("list")["objects"], [])
        usleep(UInt32(seconds * 1_000_000))
        let started = Date()
        let status = node.stop(signal: SIGTERM, timeout: 10)
        let took = Date().timeIntervalSince(started)
        print("cluster node without NATS: SIGTERM after \(seconds) s, exited in \(String(format: "%.3f", took)) s, status \(status)")
        // A liveness bound with more than 2x margin over the 1-2 s aimed at (stop() answers -1 after a SIGKILL).
        expectEqual(status, 0, "exit status \(status): \(node.log.suffix(2000))")
        #expect(took < 5, "took \(took) s to stop")
    }
}

/// SIGTERM to a node cut off from NATS by a partition (its NATS connections through `TCPProxy`s that keep them
/// open but forward nothing, new ones included) while writes are in flight: the node exits within about a
/// second, and what it acknowledged is in its store. An outside harness measured 2.7-2.9 s here before the
/// bridge's stop was bounded (docs/design.md, "Cluster", Threads). In the `cluster` suite so that it never runs
/// beside another cluster.
extension ClusterTests {
    @Test("SIGTERM during a partition, writes in flight: the node exits within a second, acknowledged writes kept",
          arguments: [0.3, 4.0])
    func stopsDuringPartition(after seconds: Double) throws {
        let cluster = try LocalCluster(label: "partition\(Int(seconds * 10))")
        try cluster.waitUntilReady()
        let proxies = try cluster.natsPorts.map { try TCPProxy(targetPort: $0) }
        let data = cluster.directory.appending("kvod-4")
        let flags = ["--cluster", proxies.map { "nats://127.0.0.1:\($0.port)" }.joined(separator: ","),
                     "--cluster-stream", cluster.stream, "--node", "n4"]
        let node = try KVODProcess(flags, dataDirectory: data)
        let base = try #require(try cluster.connect(0).call("create", ["object": "w", "values": ["log": []]])["rev"]?.intValue)
        _ = try node.connect().call("get", ["object": "w", "atLeastRev": .int(base)], timeout: 30)
        // Four writers on n4, two of them pipelining 8, writing until the node goes away.
        let load = ClusterWriteLoad(clients: (0..<4).map { ClusterWriteLoad.Client(ports: [node.port], pipeline: $0 % 2 == 0 ? 1 : 8,
                                                                                      writes: 1_000_000) },
                                    object: "w", keyPath: "log")
        load.start()
        #expect(load.waitForAcks(200), "the load did not get going: \(load.errors.prefix(3))\n\(node.log.suffix(2000))")
        for proxy in proxies { proxy.partition() }
        usleep(UInt32(seconds * 1_000_000))
        let started = Date()
        let status = node.stop(signal: SIGTERM, timeout: 10)
        let took = Date().timeIntervalSince(started)
        #expect(load.wait(timeout: 30), "the writers did not end with the node")
        let acknowledged = load.acknowledged
        let abandoned = node.log.contains("not waited for") ? " (a NATS thread not waited for)" : ""
        print("cluster node cut off by a partition: SIGTERM \(seconds) s after it, \(acknowledged.count) writes acknowledged, exited in \(String(format: "%.3f", took)) s\(abandoned), status \(status)")
        expectEqual(status, 0, "exit status \(status): \(node.log.suffix(2000))")
        // Under a second, with slack for this shared 2-core machine (stop() answers -1 after a SIGKILL at 10 s).
        #expect(took < 1.5, "took \(took) s to stop: \(node.log.suffix(2000))")

        // Restarted while still cut off, it serves every write it acknowledged from its own store.
        let restarted = try KVODProcess(flags, dataDirectory: data)
        let reply = try restarted.connect().call("get", ["object": "w", "keyPath": "log"])
        let values = (reply["value"]?.arrayValue ?? []).compactMap(\.stringValue)
        let present = Set(values)
        expectEqual(present.count, values.count, "\(values.count - present.count) values appear twice")
        let missing = acknowledged.map(\.value).filter { !present.contains($0) }
        #expect(missing.isEmpty, "acknowledged writes lost: \(missing.prefix(10))")
        // Healed, it catches up with the others.
        for proxy in proxies { proxy.heal() }
        // The others' state is read again each time: a batch the stopped node had sent into the partition may
        // still reach the stream once it heals (held in the proxies' sockets), moving every node on by one entry.
        let deadline = Date().addingTimeInterval(30)
        var reference = try cluster.waitForConvergence()[0]
        var digest = try JSONValue.object(restarted.connect().call("digest"))
        while digest["applied"] != reference["applied"], Date() < deadline {
            usleep(100_000)
            reference = try cluster.waitForConvergence()[0]
            digest = try JSONValue.object(restarted.connect().call("digest"))
        }
        expectEqual(digest["digest"], reference["digest"], "n4 \(digest) against n1 \(reference)\n\(restarted.log.suffix(2000))")
    }
}
