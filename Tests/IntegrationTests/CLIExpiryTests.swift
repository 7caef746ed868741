import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// `kvoclient create|set --ttl` and `kvoclient touch` (the real CLI against the real kvod), and the line a
/// subscriber prints when an object's time to live ends.
@Suite("kvoclient --ttl and touch")
struct CLIExpiryTests {
    @Test func ttlTouchAndTheExpiredLine() throws {
        let server = try KVODProcess()
        let writer = try server.connect()
        try writer.call("create", ["object": "sess:probe", "values": [:]])
        let ids = try KVOClientProcess.start(server, ["subscribe", "--pattern", "sess:*", "--count", "2"])
        _ = try waitForObservers(writer, object: "sess:probe", count: 1)
        // 3 s: room for the kvoclient processes below on a loaded machine.
        let created = try KVOClientProcess.run(server, ["create", "sess:1", #"{"user":"ada"}"#, "--ttl", "3"])
        #expect(created.status == 0 && created.stdout == "rev 2\n", "\(created)")
        let touched = try KVOClientProcess.run(server, ["touch", "sess:1"])
        let lines = touched.stdout.split(separator: "\n")
        #expect(touched.status == 0 && lines.count == 2 && lines[0].hasPrefix("expires in ") && lines[1] == "rev 2", "\(touched)")
        let untimed = try KVOClientProcess.run(server, ["touch", "sess:probe"])
        #expect(untimed.status == 0 && untimed.stdout == "no ttl\nrev 2\n", "\(untimed)")
        let set = try KVOClientProcess.run(server, ["set", "sess:probe", "n", "1", "--ttl", "0"])
        #expect(set.status == 0 && set.stdout == "rev 3\n", "\(set)")
        let result = ids.finish()
        expectEqual(result.status, 0, "\(result.stderr)")
        #expect(result.stdout.split(separator: "\n") == ["sess:1  created  rev=2", "sess:1  sourceDeleted  expired  rev=4"],
                "\(result.stdout)")
        for bad in [["create", "x", "--ttl", "-1"], ["create", "x", "--ttl", "soon"], ["touch", "missing"]] {
            let refused = try KVOClientProcess.run(server, bad)
            #expect(refused.status != 0 && refused.stdout.isEmpty, "\(bad): \(refused)")
        }
    }

    @Test("a user who may write but not read is told the touch happened, not the deadline, and not 'no ttl'")
    func touchByAWriteOnlyUser() throws {
        let scratch = try TemporaryDirectory("cli-touch")
        let usersFile = scratch.appending("users.json")
        try KVODUserTool.addUser("root", password: "root pw", usersFile: usersFile)
        try KVODUserTool.addUser("drop", password: "drop pw", rules: ["box-*=write"], usersFile: usersFile)
        let server = try KVODProcess(["--users", usersFile])
        let root = ["KVOD_PASSWORD": "root pw"], drop = ["KVOD_PASSWORD": "drop pw"]
        for (object, ttl) in [("box-timed", ["--ttl", "60"]), ("box-plain", [])] {
            let created = try KVOClientProcess.run(server, ["--user", "root", "create", object, "{}"] + ttl, environment: root)
            expectEqual(created.status, 0, "\(created)")
        }
        // Both objects answer alike: what she cannot read includes whether either has a ttl.
        for object in ["box-timed", "box-plain"] {
            let touched = try KVOClientProcess.run(server, ["--user", "drop", "touch", object], environment: drop)
            #expect(touched.status == 0 && touched.stdout.split(separator: "\n").first == "deadline not shown (no read right)",
                    "\(object): \(touched)")
        }
        let owner = try KVOClientProcess.run(server, ["--user", "root", "touch", "box-plain"], environment: root)
        #expect(owner.status == 0 && owner.stdout.hasPrefix("no ttl\n"), "\(owner)")
    }
}
