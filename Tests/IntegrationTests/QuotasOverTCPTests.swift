import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Issue 11, quotas: `--max-memory` refuses every write that would grow the store past it with
/// `quota_exceeded` (nothing changes, no event, no revision), on every write path, while reads,
/// observations, deletes and writes that do not grow the store keep working; what was acknowledged
/// is what is stored, also after a restart.
@Suite("quotas over TCP")
struct QuotasOverTCPTests {
    static func text(_ count: Int, _ character: Character = "x") -> JSONValue {
        .string(String(repeating: character, count: count))
    }

    @Test("fill to --max-memory: growing writes are refused, nothing acknowledged is lost, delete makes room")
    func fillToTheQuota() throws {
        let directory = try TemporaryDirectory("quota")
        let server = try KVODProcess(["--max-memory", "4000"], dataDirectory: directory.appending("data"))
        let client = try server.connect()
        let observer = try server.connect()
        try client.call("create", ["object": "s", "values": ["v": 1]])
        try client.call("create", ["object": "r", "values": ["to": ["$ref": "o"]]])
        try client.call("create", ["object": "o", "values": ["list": ["ab"]]])
        try client.call("create", ["object": "filler", "values": ["v": Self.text(500)]])
        try client.call("bind", ["from": ["object": "s", "keyPath": "v"], "to": ["object": "o", "keyPath": "copy"]])
        for keyPath in ["list", "copy", "k0", "grown"] {
            _ = try observer.call("observe", ["object": "o", "keyPath": .string(keyPath), "options": ["new", "old"]])
        }

        // Fill: 100-byte values until the store is full.
        var stored = 0
        var refusal: JSONValue?
        while refusal == nil, stored < 100 {
            let reply = try client.request("set", ["object": "o", "keyPath": .string("k\(stored)"), "value": Self.text(100)])
            if reply["ok"] == true { stored += 1 } else { refusal = reply }
        }
        let full = try #require(refusal)
        expectError(full, code: "quota_exceeded", "filling")
        expectEqual(full["error"]?["limit"], 4000, "\(full)")
        let used = try #require(full["error"]?["used"]?.intValue, "\(full)")
        #expect(used <= 4000 && used > 4000 - 120, "\(full)")
        expectEqual(full["error"]?["message"]?.stringValue?.contains("--max-memory"), true, "\(full)")
        #expect(stored > 20)
        // The last bytes: a write that reaches the limit exactly is accepted.
        try client.call("set", ["object": "o", "keyPath": "k0", "value": Self.text(100 + 4000 - Int(used))])
        _ = try drainEvents(observer)
        _ = try drainEvents(client)
        let revision = try currentRevision(client, object: "o")
        let before = try client.call("get", ["object": "o"])["value"]

        // Every write path that would grow the store is refused with quota_exceeded; nothing changes.
        for (op, params) in [
            ("create", ["object": "p"]),
            ("set", ["object": "o", "keyPath": "k0", "value": Self.text(200)]),
            ("set", ["object": "o", "keyPath": "grown", "value": 1]),
            ("set", ["object": "r", "keyPath": "to.k0", "value": Self.text(200)]),
            ("set", ["object": "o", "keyPath": "list.0", "value": Self.text(200)]),
            ("insert", ["object": "o", "keyPath": "list", "values": [Self.text(200)]]),
            ("replace", ["object": "o", "keyPath": "list", "index": 0, "value": Self.text(200)]),
            ("defineClass", ["class": ["name": "Late", "properties": ["n": ["type": "integer"]]]]),
            ("bind", ["from": ["object": "s", "keyPath": "w"], "to": ["object": "o", "keyPath": "w"]]),
        ] as [(String, [String: JSONValue])] {
            let reply = try client.request(op, params)
            expectError(reply, code: "quota_exceeded", "\(op) \(params)")
            expectEqual(reply["error"]?["limit"], 4000, "\(op): \(reply)")
            expectEqual(reply["error"]?["used"], 4000, "\(op): \(reply)")
        }
        expectEqual(try currentRevision(client, object: "o"), revision, "a refused write advanced the revision")
        expectEqual(try client.call("get", ["object": "o"])["value"], before)
        expectEqual(try client.request("get", ["object": "p"])["error"]?["code"], "not_found")
        expectEqual(try client.call("classes")["classes"], [])
        try expectNoEvents(observer, "a refused write notified")

        // A binding's write that would grow the store is skipped and reported to its creator; the
        // write that triggered it (same size) is stored and acknowledged.
        try client.call("set", ["object": "s", "keyPath": "v", "value": 2])
        let bindingEvent = try #require(client.pendingEvents.first { $0["event"] == "binding" }, "\(client.pendingEvents)")
        expectEqual(bindingEvent["reason"], "refused", "\(bindingEvent)")
        expectEqual(bindingEvent["error"]?["code"], "quota_exceeded", "\(bindingEvent)")
        expectEqual(try client.call("get", ["object": "o", "keyPath": "copy"])["value"], .null)
        expectEqual(try client.call("get", ["object": "s", "keyPath": "v"])["value"], 2)
        try expectNoEvents(observer, "a refused binding write notified")
        _ = try drainEvents(client)

        // Reads, observations and writes that keep the size work while full.
        expectEqual(try client.call("list")["objects"], ["filler", "o", "r", "s"])
        expectEqual(try client.call("info", ["object": "o"])["observers"]?.arrayValue?.count, 4)
        let late = try client.call("observe", ["object": "o", "keyPath": "k1", "options": ["initial", "new"]])
        #expect(late["sub"] != nil)
        expectEqual(try client.nextEvent()?["change"]?["new"], Self.text(100))
        let sameSize = Self.text(100 + 4000 - Int(used), "y")
        try client.call("set", ["object": "o", "keyPath": "k0", "value": sameSize])
        let events = try drainEvents(observer)
        #expect(events.count == 1 && events.first?["change"]?["new"] == sameSize, "\(events)")

        // Nothing acknowledged is lost across a restart, and the store is still full.
        let acknowledged = try ["o", "r", "s", "filler"].map { try client.call("get", ["object": .string($0)])["value"] }
        let restarted = try server.restart()
        let again = try restarted.connect()
        expectEqual(try ["o", "r", "s", "filler"].map { try again.call("get", ["object": .string($0)])["value"] }, acknowledged)
        expectError(try again.request("set", ["object": "o", "keyPath": "k0", "value": Self.text(200)]),
                    code: "quota_exceeded", "after the restart")

        // Deleting makes room; growing writes succeed again.
        try again.call("delete", ["object": "filler"])
        try again.call("set", ["object": "o", "keyPath": "k0", "value": Self.text(200)])
        try again.call("create", ["object": "p", "values": ["v": Self.text(100)]])
        expectEqual(try again.call("get", ["object": "p", "keyPath": "v"])["value"], Self.text(100))
    }
}
