import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Conditional writes over TCP against the real kvod (issue 30): `ifEquals`, `ifExists` and `ifAbsent` on
/// every write of one object; a condition that does not hold is `conflict` with its details, and changes
/// nothing (no revision, no event); `ifRev` against each object's last-change revision (`changedRev` in
/// `get`), kept across a restart; conditions read with the writer's rights; malformed, misplaced or hostile
/// conditions are `bad_request`, and a conflict's reply never outgrows the connection's output buffer.
@Suite struct ConditionalWritesOverTCPTests {
    private func code(_ reply: JSONValue) -> String? { reply["error"]?["code"]?.stringValue }

    @Test("ifEquals: the write applies when the value is the expected one, else conflict with the current value and nothing changes")
    func ifEqualsGuardsTheWrite() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        let observer = try server.connect()
        try client.call("create", ["object": "acct", "values": ["balance": 100, "owner": ["name": "Ada"]]])
        try observer.call("observe", ["object": "acct", "keyPath": "balance"])

        let applied = try client.call("set", ["object": "acct", "keyPath": "balance", "value": 90,
                                              "ifEquals": ["keyPath": "balance", "value": 100.0]])
        expectEqual(applied["rev"], 2, "3 == 3.0: numbers compare by value")
        let event = try #require(try observer.nextEvent())
        expectEqual(event["change"]?["new"], 90)

        let refused = try client.request("set", ["object": "acct", "keyPath": "balance", "value": 80,
                                                 "ifEquals": ["keyPath": "balance", "value": 100]])
        expectEqual(code(refused), "conflict", "\(refused)")
        expectEqual(refused["error"]?["condition"], "ifEquals")
        expectEqual(refused["error"]?["value"], 90, "the current value, for the retry")
        expectEqual(refused["error"]?["rev"], 2, "the current revision")
        expectEqual(try client.call("get", ["object": "acct", "keyPath": "balance"])["value"], 90)
        expectEqual(try client.call("get", ["object": "acct"])["rev"], 2, "no revision for a refused write")
        try expectNoEvents(observer, "a refused conditional write notifies nobody")

        // Another key path than the one written, through nesting; a missing key reads as null.
        #expect(try client.call("increment", ["object": "acct", "keyPath": "balance", "by": 5,
                                              "ifEquals": ["keyPath": "owner.name", "value": "Ada"]])["value"] == 95)
        #expect(code(try client.request("set", ["object": "acct", "keyPath": "owner.name", "value": "Bo",
                                                "ifEquals": ["keyPath": "owner.name", "value": "Eve"]])) == "conflict")
        #expect(try client.call("set", ["object": "acct", "keyPath": "note", "value": "first",
                                        "ifEquals": ["keyPath": "note", "value": .null]])["rev"] == 4)
        #expect(code(try client.request("set", ["object": "acct", "keyPath": "note", "value": "second",
                                                "ifEquals": ["keyPath": "note", "value": .null]])) == "conflict")
        // Array operations take conditions too.
        try client.call("set", ["object": "acct", "keyPath": "log", "value": [1]])
        #expect(try client.call("insert", ["object": "acct", "keyPath": "log", "value": 2,
                                           "ifEquals": ["keyPath": "log", "value": [1]]])["rev"] == 6)
        let stale = try client.request("remove", ["object": "acct", "keyPath": "log", "index": 0,
                                                  "ifEquals": ["keyPath": "log", "value": [1]]])
        #expect(code(stale) == "conflict" && stale["error"]?["value"] == [1, 2], "\(stale)")
        // A condition on a missing object is a conflict (not `not_found`): the condition is what failed.
        let missing = try client.request("set", ["object": "nobody", "keyPath": "n", "value": 1,
                                                 "ifEquals": ["keyPath": "n", "value": 1]])
        #expect(code(missing) == "conflict" && missing["error"]?["exists"] == false, "\(missing)")
    }

    @Test("ifExists and ifAbsent: create-if-absent and delete-if-present, refused as conflict otherwise")
    func existenceConditions() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        expectEqual(try client.call("create", ["object": "lock", "values": ["holder": "a"], "ifAbsent": true])["rev"], 1)
        let second = try client.request("delete", ["object": "lock", "ifAbsent": true])
        #expect(code(second) == "conflict" && second["error"]?["condition"] == "ifAbsent"
                && second["error"]?["exists"] == true, "\(second)")
        expectEqual(try client.call("delete", ["object": "lock", "ifExists": true])["rev"], 2)
        let gone = try client.request("create", ["object": "lock", "ifExists": true])
        #expect(code(gone) == "conflict" && gone["error"]?["exists"] == false, "\(gone)")
        expectEqual(code(try client.request("get", ["object": "lock"])), "not_found", "the refused create made nothing")
        // Both conditions together: the write applies only if both hold.
        try client.call("create", ["object": "doc", "values": ["v": 1]])
        #expect(code(try client.request("set", ["object": "doc", "keyPath": "v", "value": 2, "ifExists": true,
                                                "ifEquals": ["keyPath": "v", "value": 0]])) == "conflict")
        #expect(try client.call("set", ["object": "doc", "keyPath": "v", "value": 2, "ifExists": true,
                                        "ifEquals": ["keyPath": "v", "value": 1]])["rev"] == 4)
    }

    @Test("ifRev: a write applies while the object is unchanged since the revision read, else conflict with its changedRev")
    func ifRevGuardsTheWrite() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        try client.call("create", ["object": "a", "values": ["n": 1]])
        try client.call("create", ["object": "b", "values": ["n": 1]])
        let read = try client.call("get", ["object": "a"])
        #expect(read["changedRev"] == 1 && read["rev"] == 2, "\(read)")
        expectEqual(try client.call("get", ["object": "b", "keyPath": "n"])["changedRev"], 2)
        // Writes to other objects do not move a's changedRev: a write guarded by the global rev read still applies.
        try client.call("set", ["object": "b", "keyPath": "n", "value": 2])
        expectEqual(try client.call("set", ["object": "a", "keyPath": "n", "value": 2, "ifRev": 2])["rev"], 4)
        expectEqual(try client.call("get", ["object": "a"])["changedRev"], 4)
        let stale = try client.request("set", ["object": "a", "keyPath": "n", "value": 3, "ifRev": 2])
        #expect(code(stale) == "conflict" && stale["error"]?["condition"] == "ifRev" && stale["error"]?["changedRev"] == 4
                && stale["error"]?["rev"] == 4, "\(stale)")
        expectEqual(try client.call("get", ["object": "a", "keyPath": "n"])["value"], 2)
        // Every kind of write moves it: an array operation, an increment, a set held as text.
        try client.call("set", ["object": "a", "keyPath": "list", "value": [1]])
        try client.call("insert", ["object": "a", "keyPath": "list", "value": 2])
        expectEqual(try client.call("get", ["object": "a"])["changedRev"], 6)
        try client.call("increment", ["object": "a", "keyPath": "n"])
        expectEqual(try client.call("get", ["object": "a"])["changedRev"], 7)
        expectEqual(try client.call("delete", ["object": "a", "ifRev": 7])["rev"], 8)
        let gone = try client.request("set", ["object": "a", "keyPath": "n", "value": 1, "ifRev": 100])
        #expect(code(gone) == "conflict" && gone["error"]?["exists"] == false, "\(gone)")
    }

    @Test("changedRev survives a restart, from snapshots and from redo rows alike, and ifRev is judged the same after it")
    func changedRevisionsAreDurable() throws {
        let directory = try TemporaryDirectory("changed-rev")
        let server = try KVODProcess(dataDirectory: directory.appending("data"))
        let client = try server.connect()
        try client.call("create", ["object": "small", "values": ["n": 1, "pad": .string(String(repeating: "x", count: 400))]])
        try client.call("create", ["object": "other", "values": ["n": 1]])
        for value in 2...4 { try client.call("set", ["object": "small", "keyPath": "n", "value": .int(Int64(value))]) }
        try client.call("set", ["object": "other", "keyPath": "n", "value": ["big": .string(String(repeating: "y", count: 200))]])
        try client.call("create", ["object": "untouched"])
        let before = try ["small", "other", "untouched"].map { try client.call("get", ["object": .string($0)])["changedRev"] }
        expectEqual(before, [5, 6, 7], "\(before)")
        let restarted = try server.restart(after: SIGTERM)
        let again = try restarted.connect()
        let after = try ["small", "other", "untouched"].map { try again.call("get", ["object": .string($0)])["changedRev"] }
        expectEqual(after, before)
        expectEqual(try again.request("set", ["object": "small", "keyPath": "n", "value": 0, "ifRev": 4])["error"]?["code"], "conflict")
        expectEqual(try again.call("set", ["object": "small", "keyPath": "n", "value": 0, "ifRev": 5])["rev"], 8)
    }

    @Test("malformed, misplaced or unsupported conditions are bad_request, never ignored, and change nothing")
    func malformedConditions() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        try client.call("create", ["object": "doc", "values": ["v": 1]])
        let refusals: [[String: JSONValue]] = [
            ["op": "get", "object": "doc", "ifExists": true],
            ["op": "observe", "object": "doc", "keyPath": "v", "ifEquals": ["keyPath": "v", "value": 1]],
            ["op": "set", "object": "doc", "keyPath": "v", "value": 2, "ifRev": -1],
            ["op": "set", "object": "doc", "keyPath": "v", "value": 2, "ifRev": "1"],
            ["op": "set", "object": "doc", "keyPath": "v", "value": 2, "ifRev": 1.5],
            ["op": "set", "object": "doc", "keyPath": "v", "value": 2, "ifExists": false],
            ["op": "set", "object": "doc", "keyPath": "v", "value": 2, "ifExists": true, "ifAbsent": true],
            ["op": "set", "object": "doc", "keyPath": "v", "value": 2, "ifExists": "yes"],
            ["op": "set", "object": "doc", "keyPath": "v", "value": 2, "ifEquals": 1],
            ["op": "set", "object": "doc", "keyPath": "v", "value": 2, "ifEquals": ["keyPath": "v"]],
            ["op": "set", "object": "doc", "keyPath": "v", "value": 2, "ifEquals": ["value": 1]],
            ["op": "set", "object": "doc", "keyPath": "v", "value": 2, "ifEquals": ["keyPath": "", "value": 1]],
            ["op": "set", "object": "doc", "keyPath": "v", "value": 2, "ifEquals": ["keyPath": "v", "value": 1, "valeu": 2]],
        ]
        for params in refusals {
            var fields = params
            let op = fields.removeValue(forKey: "op")!.stringValue!
            let reply = try client.request(op, fields)
            expectEqual(code(reply), "bad_request", "\(params): \(reply)")
        }
        expectEqual(try client.call("get", ["object": "doc"])["rev"], 1, "nothing was written")
        expectEqual(try client.call("get", ["object": "doc", "keyPath": "v"])["value"], 1)
    }

    @Test("hostile conditions: a value nested too deep is bad_request; a huge expected value or a huge current value never makes a huge reply")
    func hostileConditions() throws {
        let server = try KVODProcess(["--max-output-buffer", "262144"])
        let client = try server.connect()
        try client.call("create", ["object": "doc", "values": ["small": 1]])
        // Deeper than the parser allows: refused before anything is read.
        var deep: JSONValue = 1
        for _ in 0..<600 { deep = .array([deep]) }
        // The line does not parse, so its reply has no id: read it as the next message.
        try client.send(["op": "set", "id": 2, "object": "doc", "keyPath": "small", "value": 2,
                         "ifEquals": ["keyPath": "small", "value": deep]])
        let tooDeep = try client.readMessage()
        expectEqual(tooDeep["error"]?["code"], "bad_request", "\(tooDeep["error"] ?? .null)")
        // A 400 KB expected value: compared, refused, and the reply carries the small current value only.
        let huge = JSONValue.string(String(repeating: "h", count: 400_000))
        let mismatch = try client.request("set", ["object": "doc", "keyPath": "small", "value": 2,
                                                  "ifEquals": ["keyPath": "small", "value": huge]])
        #expect(code(mismatch) == "conflict" && mismatch["error"]?["value"] == 1)
        // A current value larger than the reply may be (the connection's output buffer is 256 KiB): the
        // conflict says so instead of carrying it, as a `get` of it is too_large; the connection keeps serving.
        // One object holds at most (256 KiB - 64 KiB) / 2 here, but a key path through references and a
        // collection operator reads several: `parts.@unionOfObjects.v` is three 90 KB strings.
        var references: [JSONValue] = []
        for part in ["a", "b", "c"] {
            try client.call("create", ["object": .string("part-\(part)"), "values": ["v": .string(String(repeating: "b", count: 90_000))]])
            references.append(["$ref": .string("part-\(part)")])
        }
        try client.call("set", ["object": "doc", "keyPath": "parts", "value": .array(references)])
        expectEqual(try client.request("get", ["object": "doc", "keyPath": "parts.@unionOfObjects.v"])["error"]?["code"], "too_large")
        let bigConflict = try client.request("set", ["object": "doc", "keyPath": "small", "value": 3,
                                                     "ifEquals": ["keyPath": "parts.@unionOfObjects.v", "value": "y"]])
        #expect(code(bigConflict) == "conflict" && bigConflict["error"]?["value"] == nil
                && bigConflict["error"]?["valueTooLarge"] == true, "\(bigConflict["error"]?["message"] ?? .null)")
        expectEqual(try client.call("ping")["ok"], true)
        expectEqual(try client.call("get", ["object": "doc", "keyPath": "small"])["value"], 1, "nothing was written")
    }

    @Test("conditions read with the writer's rights: a writer without read gets forbidden, not what a conflict would tell")
    func conditionsNeedRead() throws {
        let scratch = try TemporaryDirectory("conditions")
        let usersFile = scratch.appending("users.json")
        try KVODUserTool.addUser("root", password: "pw", rules: ["*=read,write,admin"], usersFile: usersFile)
        try KVODUserTool.addUser("drop", password: "pw", rules: ["box-*=write"], usersFile: usersFile)
        let server = try KVODProcess(["--users", usersFile])
        let root = try server.connect()
        try root.call("auth", ["user": "root", "password": "pw"])
        try root.call("create", ["object": "box-1", "values": ["secret": 42]])
        let drop = try server.connect()
        try drop.call("auth", ["user": "drop", "password": "pw"])
        // Without conditions the write-only user may write.
        try drop.call("set", ["object": "box-1", "keyPath": "note", "value": "hi"])
        for condition: (String, JSONValue) in [("ifEquals", ["keyPath": "secret", "value": 41]), ("ifExists", true),
                                               ("ifAbsent", true)] {
            for object in ["box-1", "box-2"] {
                let reply = try drop.request("set", ["object": .string(object), "keyPath": "note", "value": "x",
                                                     condition.0: condition.1])
                #expect(code(reply) == "forbidden" && reply["error"]?["value"] == nil && reply["error"]?["exists"] == nil,
                        "\(condition.0) on \(object): \(reply)")
            }
        }
        expectEqual(try root.call("get", ["object": "box-1", "keyPath": "note"])["value"], "hi")
    }
}
