import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// `batch` over TCP against the real kvod (issue 30): writes of objects applied all or nothing with one
/// revision; an observer never sees a state between two parts; a refused part refuses the batch, says
/// which part and why, and changes nothing; history replays a batch as one revision, across a restart;
/// permissions apply to every part; hostile batches (too many parts, nesting, parts that are not writes,
/// huge parts) are refused and the connection keeps serving.
@Suite struct BatchOverTCPTests {
    private func code(_ reply: JSONValue) -> String? { reply["error"]?["code"]?.stringValue }

    private static func part(_ op: String, _ params: [String: JSONValue]) -> JSONValue {
        var fields = params
        fields["op"] = .string(op)
        return .object(fields)
    }

    @Test("a batch applies every part with one revision, replies with each part's result, and stamps each object's changedRev")
    func appliesWithOneRevision() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        try client.call("create", ["object": "a", "values": ["balance": 100, "log": []]])
        let reply = try client.call("batch", ["ops": [
            Self.part("set", ["object": "a", "keyPath": "balance", "value": 70]),
            Self.part("create", ["object": "b", "values": ["balance": 30]]),
            Self.part("increment", ["object": "b", "keyPath": "balance", "by": 5]),
            Self.part("insert", ["object": "a", "keyPath": "log", "value": "sent 30"]),
            Self.part("set", ["object": "a", "keyPath": "balance", "value": 65, "ifEquals": ["keyPath": "balance", "value": 70]]),
        ]])
        expectEqual(reply["rev"], 2, "\(reply)")
        expectEqual(reply["results"], [[:], [:], ["value": 35], [:], [:]], "\(reply)")
        let a = try client.call("get", ["object": "a"])
        #expect(a["value"] == ["balance": 65, "log": ["sent 30"]] && a["changedRev"] == 2 && a["rev"] == 2, "\(a)")
        expectEqual(try client.call("get", ["object": "b"])["changedRev"], 2)
        // The next write is the next revision.
        expectEqual(try client.call("set", ["object": "b", "keyPath": "balance", "value": 0])["rev"], 3)
    }

    @Test("a refused part refuses the batch: its index and error in the reply, nothing stored, no revision, no event")
    func aRefusedPartChangesNothing() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        let observer = try server.connect()
        try client.call("create", ["object": "a", "values": ["n": 1, "list": [1]]])
        try observer.call("observe", ["object": "a", "keyPath": "n"])
        let digest = try client.call("digest")["digest"]
        let cases: [(JSONValue, part: Int, code: String)] = [
            ([Self.part("set", ["object": "a", "keyPath": "n", "value": 2]),
              Self.part("set", ["object": "missing", "keyPath": "n", "value": 1])], 1, "not_found"),
            ([Self.part("delete", ["object": "a"]),
              Self.part("create", ["object": "a2"]),
              Self.part("remove", ["object": "a2", "keyPath": "list", "index": 0])], 2, "not_found"),
            ([Self.part("insert", ["object": "a", "keyPath": "list", "value": 2]),
              Self.part("set", ["object": "a", "keyPath": "n", "value": 3, "ifEquals": ["keyPath": "n", "value": 7]])], 1, "conflict"),
            ([Self.part("create", ["object": "a"])], 0, "exists"),
            ([Self.part("set", ["object": "a", "keyPath": "n", "value": 5]),
              Self.part("increment", ["object": "a", "keyPath": "list"])], 1, "type_mismatch"),
        ]
        for (ops, part, expected) in cases {
            let reply = try client.request("batch", ["ops": ops])
            #expect(code(reply) == expected && reply["error"]?["part"] == .int(Int64(part)), "\(reply)")
            expectEqual(reply["error"]?["message"]?.stringValue?.hasPrefix("part \(part) ("), true, "\(reply)")
        }
        // The conflict keeps its details beside the part's index.
        let conflict = try client.request("batch", ["ops": [
            Self.part("set", ["object": "a", "keyPath": "n", "value": 9, "ifEquals": ["keyPath": "n", "value": 2]])]])
        #expect(conflict["error"]?["value"] == 1 && conflict["error"]?["condition"] == "ifEquals", "\(conflict)")
        expectEqual(try client.call("digest")["digest"], digest, "nothing of a refused batch stays")
        expectEqual(try client.call("get", ["object": "a"])["rev"], 1)
        try expectNoEvents(observer, "a refused batch notifies nobody")
    }

    @Test("an observer of two objects never sees one side of a transfer without the other (random batches from two writers)")
    func observersNeverSeeHalfABatch() throws {
        let server = try KVODProcess()
        let setup = try server.connect()
        try setup.call("create", ["object": "a", "values": ["balance": 500]])
        try setup.call("create", ["object": "b", "values": ["balance": 500]])
        try setup.call("create", ["object": "bank", "values": ["accounts": [["$ref": "a"], ["$ref": "b"]]]])
        let observer = try server.connect()
        let subA = try #require(try observer.call("observe", ["object": "a", "keyPath": "balance"])["sub"]?.intValue)
        let subB = try #require(try observer.call("observe", ["object": "b", "keyPath": "balance"])["sub"]?.intValue)
        let subTotal = try #require(try observer.call("observe", ["object": "bank", "keyPath": "accounts.@sum.balance"])["sub"]?.intValue)
        let transfers = 150
        let results = OutcomeCounter()
        let port = server.port
        DispatchQueue.concurrentPerform(iterations: 2) { index in
            do {
                var random = SplitMix64(state: UInt64(index + 1))
                let client = try KVOConnection(host: "127.0.0.1", port: port)
                for _ in 0..<transfers {
                    // Read both, then move a random amount with conditions on both: a lost race is a conflict.
                    let a = try client.call("get", ["object": "a", "keyPath": "balance"])["value"]!.intValue!
                    let b = try client.call("get", ["object": "b", "keyPath": "balance"])["value"]!.intValue!
                    let amount = Int64(random.below(41)) - 20
                    guard amount != 0 else { continue }
                    let reply = try client.request("batch", ["ops": [
                        Self.part("set", ["object": "a", "keyPath": "balance", "value": .int(a - amount),
                                          "ifEquals": ["keyPath": "balance", "value": .int(a)]]),
                        Self.part("set", ["object": "b", "keyPath": "balance", "value": .int(b + amount),
                                          "ifEquals": ["keyPath": "balance", "value": .int(b)]]),
                    ]])
                    results.add(reply["ok"] == true ? "ok" : reply["error"]?["code"]?.stringValue ?? "\(reply)")
                }
            } catch {
                results.add("writer \(index): \(error)")
            }
        }
        let outcomes = results.all
        #expect(Set(outcomes.keys).isSubset(of: ["ok", "conflict"]), "\(outcomes)")
        let applied = outcomes["ok"] ?? 0
        #expect(applied > 0)
        // Every event was queued before the writers' replies: a ping's reply comes after all of them.
        let events = try drainEvents(observer)
        let totalEvents = events.filter { event in event["sub"]?.intValue == subTotal }
        #expect(totalEvents.isEmpty, "the total never changed")
        // Events come in revision order, a revision's together: after each revision both balances moved and
        // the total is what it was (the observer never saw a state between the two parts).
        var balances: [Int64: Int64] = [subA: 500, subB: 500]
        var revisions: [Int64] = []
        var index = 0
        while index < events.count {
            let rev = events[index]["rev"]?.intValue ?? -1
            var subs: Set<Int64> = []
            while index < events.count, events[index]["rev"]?.intValue == rev {
                let sub = events[index]["sub"]?.intValue ?? -1
                subs.insert(sub)
                balances[sub] = events[index]["change"]?["new"]?.intValue
                index += 1
            }
            expectEqual(subs, [subA, subB], "revision \(rev)")
            expectEqual(balances[subA]! + balances[subB]!, 1000, "revision \(rev)")
            revisions.append(rev)
        }
        expectEqual(revisions.count, applied)
        expectEqual(revisions, revisions.sorted())
    }

    @Test("sinceRev replays a batch as one revision, before and after a restart")
    func historyReplaysABatchAsOneRevision() throws {
        let directory = try TemporaryDirectory("batch-history")
        let server = try KVODProcess(dataDirectory: directory.appending("data"))
        let client = try server.connect()
        try client.call("create", ["object": "a", "values": ["n": 0, "list": [0]]])
        let start = try client.call("get", ["object": "a"])["rev"]!
        for round in 1...3 {
            try client.call("batch", ["ops": [
                Self.part("set", ["object": "a", "keyPath": "n", "value": .int(Int64(round * 10))]),
                Self.part("set", ["object": "a", "keyPath": "n", "value": .int(Int64(round))]),
                Self.part("insert", ["object": "a", "keyPath": "list", "value": .int(Int64(round))]),
            ]])
        }
        func replay(_ connection: KVOConnection) throws -> [String] {
            let reply = try connection.call("observe", ["object": "a", "keyPath": "n", "sinceRev": start, "options": ["new", "old"]])
            var lines: [String] = []
            for _ in 0..<3 {
                let event = try #require(try connection.nextEvent(timeout: 10))
                lines.append("\(event["rev"]!) \(event["change"]?["old"] ?? .null)->\(event["change"]?["new"] ?? .null)")
            }
            _ = reply
            try expectNoEvents(connection, "one event per batch")
            return lines
        }
        let live = try replay(try server.connect())
        expectEqual(live, ["2 0->1", "3 1->2", "4 2->3"], "\(live)")
        let restarted = try server.restart(after: SIGKILL)
        expectEqual(try replay(try restarted.connect()), live, "the same after a restart (batches survive a SIGKILL)")
        let again = try restarted.connect()
        expectEqual(try again.call("get", ["object": "a"])["value"], ["n": 3, "list": [0, 1, 2, 3]])
    }

    @Test("every part is checked against the writer's rights: one forbidden part refuses the batch")
    func permissionsApplyToEveryPart() throws {
        let scratch = try TemporaryDirectory("batch-users")
        let usersFile = scratch.appending("users.json")
        try KVODUserTool.addUser("root", password: "pw", rules: ["*=read,write,admin"], usersFile: usersFile)
        try KVODUserTool.addUser("ann", password: "pw", rules: ["ann-*=read,write", "shared=read"], usersFile: usersFile)
        let server = try KVODProcess(["--users", usersFile])
        let root = try server.connect()
        try root.call("auth", ["user": "root", "password": "pw"])
        try root.call("create", ["object": "shared", "values": ["n": 1]])
        let ann = try server.connect()
        try ann.call("auth", ["user": "ann", "password": "pw"])
        let reply = try ann.request("batch", ["ops": [
            Self.part("create", ["object": "ann-1", "values": ["n": 1]]),
            Self.part("set", ["object": "shared", "keyPath": "n", "value": 2]),
        ]])
        #expect(code(reply) == "forbidden" && reply["error"]?["part"] == 1, "\(reply)")
        expectEqual(code(try ann.request("get", ["object": "ann-1"])), "not_found", "the first part was undone")
        expectEqual(try ann.call("batch", ["ops": [Self.part("create", ["object": "ann-2"])]])["rev"], 2)
    }

    @Test("hostile batches are refused with a clear error and the connection keeps serving")
    func hostileBatches() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        try client.call("create", ["object": "a", "values": ["n": 1]])
        let tooMany = JSONValue.array((0..<1_001).map { _ in Self.part("increment", ["object": "a", "keyPath": "n"]) })
        let refused = try client.request("batch", ["ops": tooMany])
        #expect(code(refused) == "too_large" && refused["error"]?["limit"] == 1000, "\(refused)")
        let atLimit = JSONValue.array((0..<1_000).map { _ in Self.part("increment", ["object": "a", "keyPath": "n"]) })
        expectEqual(try client.call("batch", ["ops": atLimit])["rev"], 2, "1,000 parts are one revision")
        expectEqual(try client.call("get", ["object": "a", "keyPath": "n"])["value"], 1001)
        let malformed: [(JSONValue?, String)] = [
            (nil, "missing 'ops'"),
            ([], "at least one"),
            ("set", "must be an array"),
            ([1], "request object"),
            ([Self.part("get", ["object": "a"])], "cannot be part of a batch"),
            ([Self.part("batch", ["ops": [Self.part("delete", ["object": "a"])]])], "cannot be part of a batch"),
            ([Self.part("observe", ["object": "a", "keyPath": "n"])], "cannot be part of a batch"),
            ([Self.part("bind", ["from": ["object": "a", "keyPath": "n"], "to": ["object": "a", "keyPath": "m"]])], "cannot be part of a batch"),
            ([Self.part("set", ["object": "a", "keyPath": "n", "value": 2, "id": 7])], "no 'id'"),
            ([Self.part("set", ["object": "a", "keyPath": "n"])], "missing 'value'"),
            ([Self.part("nonsense", [:])], "unknown op"),
        ]
        for (ops, message) in malformed {
            let reply = try client.request("batch", ops.map { ["ops": $0] } ?? [:])
            let text = reply["error"]?["message"]?.stringValue ?? ""
            #expect(code(reply) != nil && text.contains(message), "\(ops ?? .null): \(reply)")
        }
        // A batch as large as a line may be (1 MiB by default) of small parts, and one of one huge value.
        let big = JSONValue.string(String(repeating: "z", count: 900_000))
        #expect(try client.call("batch", ["ops": [Self.part("set", ["object": "a", "keyPath": "big", "value": big]),
                                                  Self.part("delete", ["object": "a"])]])["rev"] == 3)
        expectEqual(code(try client.request("get", ["object": "a"])), "not_found")
        expectEqual(try client.call("ping")["ok"], true)
    }
}
