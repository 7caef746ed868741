import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Pattern (object-set) observations against the real kvod over TCP (docs/protocol.md, "Observing
/// object sets (patterns)"): id sets and key paths on present and future objects, `initial`, resuming
/// and resync, compact events naming their object, `unobserve` and disconnect cleanup seen through
/// `info`, permissions, malformed patterns, the observation limit and a write that many patterns match.
@Suite struct PatternObservationsOverTCPTests {
    private func events(_ client: KVOConnection) throws -> [JSONValue] { try PatternEventSummary.events(client) }

    private func summary(_ event: JSONValue) -> String { PatternEventSummary.line(event) }

    @Test func idSetAndKeyPathOnPresentAndFutureObjects() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        let writer = try server.connect()
        try writer.call("create", ["object": "user:1", "values": ["address": ["city": "London"]]])
        try writer.call("create", ["object": "order:1", "values": [:]])
        let ids = try client.call("observe", ["pattern": "user:*", "options": ["initial"]])["sub"]
        let cities = try client.call("observe", ["pattern": "user:*", "keyPath": "address.city",
                                                 "options": ["initial", "new", "old"]])["sub"]
        try writer.call("create", ["object": "user:2", "values": ["address": ["city": "Oslo"]]])
        try writer.call("create", ["object": "order:2", "values": ["address": ["city": "Rome"]]])
        try writer.call("set", ["object": "user:1", "keyPath": "address.city", "value": "Paris"])
        try writer.call("set", ["object": "order:1", "keyPath": "x", "value": 1])
        try writer.call("delete", ["object": "user:1"])
        try writer.call("delete", ["object": "order:2"])
        let all = try events(client)
        #expect(all.filter { $0["sub"] == ids }.map(summary) == [
            #"initial - new=["user:1"]"#, "created user:2", "sourceDeleted user:1",
        ])
        #expect(all.filter { $0["sub"] == cities }.map(summary) == [
            #"initial user:1 new="London""#, #"created user:2 new="Oslo" old=null"#,
            #"valueChanged user:1 new="Paris" old="London""#, #"sourceDeleted user:1 new=null old="Paris""#,
        ])
        #expect(all.filter { $0["sub"] == cities }.allSatisfy { $0["keyPath"] == "address.city" })
        #expect(all.filter { $0["sub"] == ids }.allSatisfy { $0["keyPath"] == nil })
    }

    @Test func compactEventsNameTheirObject() throws {
        let server = try KVODProcess()
        let client = LineClient(try server.connect())
        try client.call("hello", ["events": "compact"])
        let writer = try server.connect()
        let sub = try client.call("observe", ["pattern": "item-*", "keyPath": "n"])["sub"]!
        let ids = try client.call("observe", ["pattern": "item-*"])["sub"]!
        try writer.call("create", ["object": "item-7", "values": ["n": 1]])
        try writer.call("set", ["object": "item-7", "keyPath": "n", "value": 2])
        let lines = try client.takeEvents().map { String(decoding: $0, as: UTF8.self) }
        #expect(lines == [
            #"{"s":\#(sub),"r":1,"t":"item-7","w":"c","n":1}"#,
            #"{"s":\#(ids),"r":1,"t":"item-7","w":"c"}"#,
            #"{"s":\#(sub),"r":2,"t":"item-7","n":2}"#,
        ])
    }

    @Test func resumingReplaysMatchingChangesAndResyncsPastHistory() throws {
        let server = try KVODProcess(["--history", "5"])
        let writer = try server.connect()
        try writer.call("create", ["object": "s-1", "values": ["v": 0]])  // 1
        try writer.call("create", ["object": "s-2", "values": ["v": 0]])  // 2
        try writer.call("set", ["object": "s-1", "keyPath": "v", "value": 1])  // 3
        try writer.call("create", ["object": "t-1", "values": ["v": 0]])  // 4
        try writer.call("delete", ["object": "s-2"])  // 5
        let client = try server.connect()
        let sub = try client.call("observe", ["pattern": "s-*", "keyPath": "v", "sinceRev": 2, "options": ["new", "old"]])["sub"]
        try writer.call("set", ["object": "s-1", "keyPath": "v", "value": 2])  // 6
        let resumed = try events(client).filter { $0["sub"] == sub }
        #expect(resumed.map(summary) == ["valueChanged s-1 new=1 old=0", "sourceDeleted s-2 new=null old=0",
                                         "valueChanged s-1 new=2 old=1"])
        expectEqual(resumed.map { $0["rev"] }, [3, 5, 6])
        // History holds revisions 2...6 only: resuming from 0 resyncs with the ids there are now.
        let resync = try client.call("observe", ["pattern": "s-*", "sinceRev": 0])["sub"]
        let resyncEvents = try events(client).filter { $0["sub"] == resync }
        expectEqual(resyncEvents.map(summary), [#"resync - new=["s-1"]"#])
        expectEqual(resyncEvents.first?["rev"], 6)
    }

    @Test func unobserveAndDisconnectLeaveNothingBehind() throws {
        let server = try KVODProcess()
        let admin = try server.connect()
        try admin.call("create", ["object": "job-1", "values": [:]])
        func observerCount() throws -> Int { try admin.call("info", ["object": "job-1"])["observers"]?.arrayValue?.count ?? -1 }
        let client = try server.connect()
        let first = try client.call("observe", ["pattern": "job-*"])["sub"]!
        for index in 0..<50 {
            let keyPath = "k" + String(index)
            try client.call("observe", ["pattern": "job-*", "keyPath": .string(keyPath)])
        }
        expectEqual(try observerCount(), 51)
        expectEqual(try admin.call("info", ["object": "job-1"])["observers"]?.arrayValue?.first?["pattern"], "job-*")
        expectEqual(try client.call("unobserve", ["sub": first])["removed"], true)
        expectEqual(try client.call("unobserve", ["sub": first])["removed"], false)
        expectEqual(try admin.call("unobserve", ["sub": first])["removed"], false, "another connection's")
        expectEqual(try observerCount(), 50)
        client.close()
        let deadline = monotonicSeconds() + 5
        while try observerCount() != 0, monotonicSeconds() < deadline { Thread.sleep(forTimeInterval: 0.02) }
        expectEqual(try observerCount(), 0)
        try admin.call("create", ["object": "job-2", "values": [:]])
    }

    @Test func eventsOnlyForObjectsTheUserMayRead() throws {
        let scratch = try TemporaryDirectory("pattern-permissions")
        let usersFile = scratch.appending("users.json")
        try KVODUserTool.addUser("root", password: "pw", rules: ["*=read,write,admin"], usersFile: usersFile)
        try KVODUserTool.addUser("clerk", password: "pw", rules: ["doc-public-*=read"], usersFile: usersFile)
        let server = try KVODProcess(["--users", usersFile])
        let root = try server.connect()
        try root.call("auth", ["user": "root", "password": "pw"])
        let clerk = try server.connect()
        try clerk.call("auth", ["user": "clerk", "password": "pw"])
        try root.call("create", ["object": "doc-public-1", "values": ["t": "a"]])
        try root.call("create", ["object": "doc-secret-1", "values": ["t": "b"]])
        let ids = try clerk.call("observe", ["pattern": "doc-*", "options": ["initial"]])["sub"]
        let texts = try clerk.call("observe", ["pattern": "doc-*", "keyPath": "t"])["sub"]
        try root.call("create", ["object": "doc-secret-2", "values": ["t": "c"]])
        try root.call("set", ["object": "doc-secret-1", "keyPath": "t", "value": "d"])
        try root.call("set", ["object": "doc-public-1", "keyPath": "t", "value": "e"])
        try root.call("delete", ["object": "doc-secret-2"])
        let heard = try events(clerk)
        expectEqual(heard.filter { $0["sub"] == ids }.map(summary), [#"initial - new=["doc-public-1"]"#])
        expectEqual(heard.filter { $0["sub"] == texts }.map(summary), [#"valueChanged doc-public-1 new="e""#])
    }

    @Test func malformedPatternsAreRefusedAndTheConnectionKeepsServing() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        let cases: [([String: JSONValue], String)] = [
            (["pattern": ""], "must not be empty"),
            (["pattern": .string(String(repeating: "a", count: 1025) + "*")], "longer than 1024 bytes"),
            (["pattern": 3], "must be a string"),
            (["pattern": "a*", "object": "a"], "either 'object' or 'pattern'"),
            (["pattern": "a*", "keyPath": "a..b"], "empty key"),
            (["pattern": "a*", "options": ["sideways"]], "unknown option"),
        ]
        for (params, message) in cases {
            let reply = try client.request("observe", params)
            expectError(reply, code: "bad_request", "\(params)")
            expectEqual(reply["error"]?["message"]?.stringValue?.contains(message), true, "\(reply)")
        }
        try client.call("create", ["object": "a1", "values": [:]])
        #expect(try client.call("observe", ["pattern": "a*", "options": ["initial"]])["sub"] != nil)
        expectEqual(try client.nextEvent()?["change"]?["new"], ["a1"])
    }

    @Test func tenThousandPatternsFromOneConnectionHitTheObservationLimit() throws {
        let server = try KVODProcess(["--max-observations-per-connection", "1000"])
        let client = try server.connect()
        var bytes: [UInt8] = []
        for index in 0..<10_000 {
            bytes += JSONWriter.bytes(["op": "observe", "id": .int(Int64(index)), "pattern": .string("p\(index):*")])
            bytes.append(0x0A)
        }
        try client.send(raw: bytes)
        var accepted = 0
        var refused = 0
        for _ in 0..<10_000 {
            let reply = try client.readMessage()
            if reply["ok"] == true { accepted += 1 } else if reply["error"]?["code"] == "too_many_observations" { refused += 1 }
        }
        expectEqual(accepted, 1000)
        expectEqual(refused, 9000)
        try client.call("create", ["object": "p5:x", "values": [:]])
        expectEqual(try client.nextEvent()?["object"], "p5:x", "the connection keeps serving its patterns")
    }

    @Test func aWriteThatManyPatternsMatchStaysWithinItsBudgets() throws {
        // 20 connections with 500 matching patterns each (10,000): one `set` makes one notification per
        // key path shared by every recipient; the writer's reply comes back promptly and every
        // subscriber gets its events.
        let server = try KVODProcess()
        let writer = try server.connect()
        try writer.call("create", ["object": "hot:1", "values": ["v": 0]])
        var subscribers: [KVOConnection] = []
        for _ in 0..<20 {
            let client = try server.connect()
            var bytes: [UInt8] = []
            for index in 0..<500 {
                let request: JSONValue = index % 2 == 0
                    ? ["op": "observe", "id": .int(Int64(index)), "pattern": "hot:*", "keyPath": "v"]
                    : ["op": "observe", "id": .int(Int64(index)), "pattern": "*"]
                bytes += JSONWriter.bytes(request)
                bytes.append(0x0A)
            }
            try client.send(raw: bytes)
            for _ in 0..<500 { #expect(try client.readMessage()["ok"] == true) }
            subscribers.append(client)
        }
        let start = monotonicSeconds()
        try writer.call("set", ["object": "hot:1", "keyPath": "v", "value": 1])
        try writer.call("delete", ["object": "hot:1"])
        let elapsed = monotonicSeconds() - start
        #expect(elapsed < 5, "two writes each matched by 10,000 patterns took \(elapsed) s")
        for client in subscribers {
            var count = 0
            while count < 750, try client.nextEvent(timeout: 10) != nil { count += 1 }
            expectEqual(count, 750, "250 value changes, 250 key path deletions, 250 id deletions")
        }
    }
}
