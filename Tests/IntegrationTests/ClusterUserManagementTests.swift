import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Online user management in cluster mode (docs/design.md, "Users in a cluster"), with real processes
/// (`LocalCluster`): every admin operation but `userList` goes through the stream with its password
/// hash or token made by the node that took it, so every node applies the same change at the same point
/// of the stream: a user added on one node logs in on another, rules granted on one node change an open
/// connection on another, two nodes adding the same user at once give one `ok` and one `exists`, a
/// removed user's connections close on every node, and a node killed and restarted has the same users.
@Suite("cluster user management", .serialized, .enabled(if: LocalCluster.natsServerPath != nil,
                                                        "nats-server is not installed (scripts/setup.sh installs it)"))
struct ClusterUserManagementTests {
    private static let root = (user: "root", password: "root-pw")

    private func login(_ cluster: LocalCluster, _ index: Int, _ user: String, _ password: String) throws -> KVOConnection {
        let connection = try cluster.nodes[index].connect()
        try connection.call("auth", ["user": .string(user), "password": .string(password)], timeout: 30)
        return connection
    }

    private func errorCode(_ reply: JSONValue) -> String? { reply["error"]?["code"]?.stringValue }

    /// Retries `body` until it returns true (another node applies a change a few milliseconds later).
    private func eventually(_ what: String, timeout: Double = 10, _ body: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while try !body() {
            guard Date() < deadline else { throw LocalClusterError.notReady(what) }
            usleep(20_000)
        }
    }

    @Test("users added, granted, given tokens and removed on one node hold on every node, and survive a SIGKILL")
    func userChangesAreReplicated() throws {
        let cluster = try LocalCluster(label: "users", kvodArguments: ["--cluster-snapshot-every", "4"], admin: Self.root)
        try cluster.waitUntilReady()
        let admins = try (0..<3).map { try cluster.connect($0) }
        try admins[0].call("create", ["object": "doc-1", "values": ["title": "a"]])

        // userAdd on n1; alice logs in on n3 with the rules given, not more.
        let added = try admins[0].call("userAdd", ["user": "alice", "password": "alice-pw", "hashCost": "minimal",
                                                   "rules": [["objects": "doc-*", "allow": ["read"]]]], timeout: 30)
        expectEqual(added["user"], "alice")
        var alice: KVOConnection?
        try eventually("alice never logged in on n3") {
            let connection = try cluster.nodes[2].connect()
            let reply = try connection.request("auth", ["user": "alice", "password": "alice-pw"], timeout: 30)
            if reply["ok"] == true { alice = connection }
            return alice != nil
        }
        let aliceOnN3 = try #require(alice)
        expectEqual(try aliceOnN3.call("get", ["object": "doc-1", "keyPath": "title"])["value"], "a")
        expectEqual(errorCode(try aliceOnN3.request("set", ["object": "doc-1", "keyPath": "title", "value": "b"])), "forbidden")
        // Not an admin: refused, on every node alike.
        expectEqual(errorCode(try aliceOnN3.request("userAdd", ["user": "mallory", "password": "x", "hashCost": "minimal"])), "forbidden")

        // userGrant on n2 changes alice's open connection on n3.
        try admins[1].call("userGrant", ["user": "alice", "rules": [["objects": "doc-*", "allow": ["write"]]]])
        try eventually("the grant made on n2 never reached alice's connection on n3") {
            try aliceOnN3.request("set", ["object": "doc-1", "keyPath": "title", "value": "b"])["ok"] == true
        }

        // tokenCreate on n3: the token (made there, only its hash in the stream) works on n1.
        let made = try admins[2].call("tokenCreate", ["user": "alice"])
        let token = try #require(made["token"]?.stringValue)
        expectEqual(made["tokenID"]?.stringValue.map { token.contains($0) }, true)
        try eventually("alice's token made on n3 never worked on n1") {
            try cluster.nodes[0].connect().request("auth", ["token": .string(token)])["ok"] == true
        }

        // Two admins add the same user at once on two nodes (both requests sent before either reply is
        // read): the stream orders them, and every node refuses the second alike.
        let racers = try (0..<2).map { try cluster.connect($0) }
        for (index, racer) in racers.enumerated() {
            try racer.send(["op": "userAdd", "id": 1, "user": "bob", "password": .string("bob-\(index)"), "hashCost": "minimal"])
        }
        let replies: [JSONValue?] = try racers.map { try $0.readMessage(timeout: 30) }
        let outcomes = replies.map { $0?["ok"] == true ? "ok" : ($0.flatMap(errorCode) ?? "no reply") }.sorted()
        expectEqual(outcomes, ["exists", "ok"], "\(replies)")
        // Whichever won, its password is bob's on every node.
        let winner = replies[0]?["ok"] == true ? 0 : 1
        try cluster.waitForConvergence()
        for index in 0..<3 { _ = try login(cluster, index, "bob", "bob-\(winner)") }

        // userRemove on n1 closes alice's connection on n3 and her token stops working everywhere.
        try admins[0].call("userRemove", ["user": "alice"])
        #expect(throws: KVOClientError.self) {
            for _ in 0..<50 { _ = try aliceOnN3.request("ping", [:], timeout: 1) ; usleep(100_000) }
        }
        try cluster.waitForConvergence()
        for index in 0..<3 {
            expectEqual(errorCode(try cluster.nodes[index].connect().request("auth", ["token": .string(token)])), "unauthenticated")
        }

        // Same users everywhere (the digest covers them), also after a SIGKILL and restart of n2, which
        // stored its users in the transaction of the stream sequence it applied.
        var digests = try cluster.waitForConvergence()
        expectEqual(Set(digests.map { $0["digest"]?.stringValue }).count, 1, "\(digests)")
        try cluster.restart(1, after: SIGKILL)
        try admins[0].call("userPasswd", ["user": "bob", "password": "bob-new", "hashCost": "minimal"], timeout: 30)
        digests = try cluster.waitForConvergence()
        expectEqual(Set(digests.map { $0["digest"]?.stringValue }).count, 1, "\(digests)")
        for index in 0..<3 { _ = try login(cluster, index, "bob", "bob-new") }
        let listed = try cluster.connect(1).call("userList")["users"]
        expectEqual(listed?.arrayValue?.compactMap { $0["name"]?.stringValue }, ["bob", "root"])

        // A new node on an empty data directory (no users of its own) installs a snapshot, which carries
        // the users: it is not in open mode, bob logs in with his latest password, its digest is the others'.
        // Once the stream was trimmed (a snapshot is complete), a full replay is impossible.
        _ = try cluster.waitForTrim()
        let n4 = try KVODProcess(["--cluster", cluster.natsURLs, "--cluster-stream", cluster.stream, "--node", "n4",
                                  "--cluster-snapshot-every", "4"], dataDirectory: cluster.directory.appending("kvod-4"))
        defer { n4.stop(signal: SIGKILL) }
        let target = try cluster.waitForConvergence()[0]
        expectEqual(errorCode(try n4.connect().request("digest")), "unauthenticated", "n4 must not be in open mode: \(n4.log)")
        let rootOnN4 = try n4.connect()
        try rootOnN4.call("auth", ["user": .string(Self.root.user), "password": .string(Self.root.password)], timeout: 30)
        var joined: JSONValue = .null
        try eventually("n4 never caught up") {
            joined = .object(try rootOnN4.call("digest"))
            return joined["applied"] == target["applied"]
        }
        #expect(joined["bootstrapSnapshot"] != nil, "\(joined)")
        expectEqual(joined["digest"], target["digest"], "\(joined) against \(target)")
        _ = try n4.connect().call("auth", ["user": "bob", "password": "bob-new"], timeout: 30)
    }
}
