import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// The stream's settings against real NATS servers (docs/design.md, "The stream's settings";
/// `StreamRequirements`): kvod creates the stream with file storage, 3 replicas and an explicit duplicate window
/// and finds nothing wrong with it; a node whose `--cluster-write-timeout` needs a longer window than the stream
/// has refuses to start (one line per problem) when it can reach NATS at start-up, and, cut off then, stays out
/// of the stream once it can (writes `unavailable`, nothing applied), logging why. In the `cluster` suite so that
/// it never runs beside another cluster.
extension ClusterTests {
    @Test("the stream kvod creates fits; a write timeout beyond its duplicate window refuses a node, at start-up or once NATS answers")
    func streamSettingsChecked() throws {
        let cluster = try LocalCluster(label: "settings")
        try cluster.waitUntilReady()
        // As kvod created it: file storage, R3, JetStream's 2-minute window stated, only kvod's subject, no limits.
        let detail = try #require(LocalCluster.httpGet(port: cluster.monitorPorts[0], path: "/jsz?accounts=true&streams=true&config=true"))
        let json = try JSONParser.parse(Array(detail.utf8))
        let streams = (json["account_details"]?.arrayValue ?? []).flatMap { $0["stream_detail"]?.arrayValue ?? [] }
        let config = try #require(streams.first { $0["name"]?.stringValue == cluster.stream }?["config"], "\(detail.prefix(2000))")
        #expect(config["storage"] == "file" && config["num_replicas"] == 3, "\(config)")
        expectEqual(config["duplicate_window"], 120_000_000_000, "\(config)")
        #expect(config["subjects"] == [.string("kvod.\(cluster.stream).log")] && config["max_age"] == 0 && config["max_msgs"] == -1, "\(config)")
        for (index, node) in cluster.nodes.enumerated() {
            #expect(!node.log.contains("cluster: stream '"), "n\(index + 1) found a problem: \(node.log.suffix(2000))")
        }

        // 100 s of retries need a window of 130 s: refused at start-up, one line per problem, then the refusal.
        let flags = ["--cluster-stream", cluster.stream, "--node", "n4", "--cluster-write-timeout", "100"]
        let refused = #expect(throws: KVODProcessError.self) {
            _ = try KVODProcess(["--cluster", cluster.natsURLs] + flags, dataDirectory: cluster.directory.appending("kvod-4"))
        }
        if case let .exitedEarly(status, log)? = refused {
            expectEqual(status, 1, "\(log)")
            #expect(log.contains("cluster: stream '\(cluster.stream)' has a duplicate window of 2m, shorter than the 130s kvod needs"), "\(log)")
            #expect(log.contains("could lose or repeat acknowledged writes (the problem logged above)"), "\(log)")
        }

        // Cut off at start-up it cannot check and starts; once NATS answers, its bridge finds the problem and
        // keeps the node out of the stream.
        let proxies = try cluster.natsPorts.map { try TCPProxy(targetPort: $0) }
        for proxy in proxies { proxy.partition() }
        let urls = proxies.map { "nats://127.0.0.1:\($0.port)" }.joined(separator: ",")
        let late = try KVODProcess(["--cluster", urls] + flags, dataDirectory: cluster.directory.appending("kvod-5"))
        for proxy in proxies { proxy.heal() }
        #expect(late.waitForLog("has a duplicate window of 2m, shorter than the 130s kvod needs", timeout: 30), "\(late.log.suffix(2000))")
        #expect(late.waitForLog("cluster: the stream: its settings could lose or repeat acknowledged writes", timeout: 10),
                "\(late.log.suffix(2000))")
        expectEqual(try late.connect().call("digest")["applied"], 0)
        #expect(!late.log.contains("subscribed to stream"), "\(late.log.suffix(2000))")
    }
}
