import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Writes pipelined on one connection of a cluster node (docs/design.md, "Cluster"): they go to the stream
/// together (a few entries for many writes, not one round trip each), their replies come in request order
/// with consecutive revisions, and a request pipelined after them (a get, an unknown operation, another
/// write's get) is answered after them and sees them. In the `cluster` suite so that it never runs beside
/// another cluster.
extension ClusterTests {
    @Test("pipelined writes on one connection: replies in order, consecutive revisions, a get after a set sees it")
    func pipelinedWritesKeepOrder() throws {
        let cluster = try LocalCluster(label: "pipeline")
        try cluster.waitUntilReady()
        let client = try cluster.nodes[1].connect()
        try client.call("create", ["object": "p", "values": ["n": 0]])
        let appliedBefore = try #require(try client.call("digest")["applied"]?.intValue)

        // 60 sets, a get, an unknown operation, then set/get pairs: all in one send.
        var lines: [UInt8] = []
        func add(_ request: [String: JSONValue]) {
            JSONWriter.write(.object(request), into: &lines)
            lines.append(0x0A)
        }
        for value in 1...60 { add(["op": "set", "id": .int(Int64(value)), "object": "p", "keyPath": "n", "value": .int(Int64(value))]) }
        add(["op": "get", "id": 61, "object": "p", "keyPath": "n"])
        add(["op": "nope", "id": 62])
        for pair in 0..<10 {
            let value = Int64(100 + pair)
            add(["op": "set", "id": .int(200 + 2 * Int64(pair)), "object": "p", "keyPath": "n", "value": .int(value)])
            add(["op": "get", "id": .int(201 + 2 * Int64(pair)), "object": "p", "keyPath": "n"])
        }
        try client.send(raw: lines)
        var replies: [JSONValue] = []
        for _ in 0..<(60 + 2 + 20) { replies.append(try client.readMessage(timeout: 20)) }

        let expectedIDs: [Int64] = Array(1...62) + (0..<20).map { 200 + Int64($0) }
        expectEqual(replies.map { $0["id"]?.intValue ?? -1 }, expectedIDs, "replies out of request order")
        let setRevisions = replies.prefix(60).compactMap { $0["rev"]?.intValue }
        #expect(setRevisions.count == 60 && setRevisions == Array(setRevisions[0]..<(setRevisions[0] + 60)),
                "the pipelined sets' revisions are not consecutive: \(setRevisions)")
        expectEqual(replies[60]["value"], 60, "the get pipelined after the sets did not see the last: \(replies[60])")
        #expect(replies[61]["error"]?["code"] != nil, "\(replies[61])")
        for pair in 0..<10 {
            let get = replies[62 + 2 * pair + 1]
            expectEqual(get["value"], .int(Int64(100 + pair)), "get \(get["id"] ?? .null) saw \(get["value"] ?? .null)")
        }
        // The 60 sets went to the stream together: a few entries, not one each (the 10 set/get pairs take
        // one entry each, since every get waits for the set before it).
        let appliedAfter = try #require(try client.call("digest")["applied"]?.intValue)
        let entries = appliedAfter - appliedBefore
        print("70 pipelined sets (60 in a row, then 10 each followed by a get) took \(entries) stream entries")
        #expect(entries <= 10 + 10, "the pipelined sets went one stream entry each (\(entries) entries)")
        let digests = try cluster.waitForConvergence()
        expectEqual(Set(digests.map { $0["digest"]?.stringValue ?? "" }).count, 1, "\(digests)")
    }

    @Test("admin operations pipelined between writes are answered in their place, and a get after a change waits for it")
    func pipelinedAdminChangeKeepsOrder() throws {
        let cluster = try LocalCluster(label: "pipeadmin", admin: (user: "root", password: "root-pw"))
        try cluster.waitUntilReady()
        let client = try cluster.connect(1)
        try client.call("create", ["object": "p", "values": ["n": 0]])
        var lines: [UInt8] = []
        for request: JSONValue in [
            ["op": "set", "id": 1, "object": "p", "keyPath": "n", "value": 1],
            ["op": "userGrant", "id": 2, "user": "root", "rules": [["objects": "extra-*", "allow": ["read"]]]],
            ["op": "get", "id": 3, "object": "p", "keyPath": "n"],
            ["op": "set", "id": 4, "object": "p", "keyPath": "n", "value": 2],
            ["op": "userList", "id": 5],
            ["op": "get", "id": 6, "object": "p", "keyPath": "n"],
        ] {
            JSONWriter.write(request, into: &lines)
            lines.append(0x0A)
        }
        try client.send(raw: lines)
        let replies = try (0..<6).map { _ in try client.readMessage(timeout: 20) }
        expectEqual(replies.map { $0["id"]?.intValue ?? -1 }, [1, 2, 3, 4, 5, 6], "replies out of request order: \(replies)")
        #expect(replies.allSatisfy { $0["ok"] == true }, "\(replies)")
        #expect(replies[2]["value"] == 1 && replies[5]["value"] == 2, "\(replies)")
    }
}
