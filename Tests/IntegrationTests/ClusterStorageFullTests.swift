import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Issue 27 in cluster mode: a node whose disk fills stops applying the stream (it cannot store what it
/// would apply), says why, refuses writes, keeps serving reads; when space returns it subscribes again
/// from what it committed and catches up with the others. In the `cluster` suite so that it never runs
/// beside another cluster.
extension ClusterTests {
    @Test("a node whose disk fills stops applying, refuses writes, and catches up once space returns",
          .enabled(if: SmallFileSystem.canMount, "needs the right to mount a tmpfs (root)"))
    func nodeWithFullDiskCatchesUp() throws {
        let disk = try SmallFileSystem(bytes: 2 << 20)
        let cluster = try LocalCluster(label: "diskfull", dataDirectories: [2: disk.appending("kvod-3")])
        try cluster.waitUntilReady()
        let writer = try cluster.connect(0)
        var created = 0
        // 8 KiB values until the third node says its disk is full (2 MiB hold a few hundred at most).
        while created < 600, !cluster.nodes[2].log.contains("storage full") {
            try writer.call("create", ["object": .string("c\(created)"), "values": ["pad": StorageFullTests.padding]])
            created += 1
        }
        #expect(cluster.nodes[2].waitForLog("storage full", timeout: 10), "\(cluster.diagnostics())")
        let full = try cluster.connect(2)
        let refused = try full.request("create", ["object": "on-n3"])
        expectEqual(refused["error"]?["code"], "storage_full", "\(refused)")
        expectEqual(try full.request("get", ["object": "c0", "keyPath": "pad"])["value"], StorageFullTests.padding)
        // The others go on.
        for index in created..<(created + 20) {
            try writer.call("create", ["object": .string("c\(index)"), "values": ["n": .int(Int64(index))]])
        }
        let last = "c\(created + 19)"
        #expect(try full.request("get", ["object": .string(last)])["error"]?["code"] == "not_found",
                "a node that cannot store applied past what it committed")

        try disk.resize(bytes: 32 << 20)
        #expect(cluster.nodes[2].waitForLog("storage writable again", timeout: 10), "\(cluster.diagnostics())")
        let digests = try cluster.waitForConvergence()
        expectEqual(Set(digests.map { "\($0["digest"] ?? .null)" }).count, 1, "\(digests)")
        expectEqual(try cluster.connect(2).call("get", ["object": .string(last), "keyPath": "n"])["value"], .int(Int64(created + 19)))
    }
}
