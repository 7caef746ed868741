import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// History restored from disk (kept packed, as its rows' JSON text, decoded when replayed) replays
/// `observe` with `sinceRev` byte for byte as the history the running kvod recorded itself: every event
/// line a resuming observer receives is the same before a restart as after it, and after a second restart
/// that follows writes made on restored history.
@Suite("restored history over TCP")
struct RestoredHistoryOverTCPTests {
    @Test("sinceRev replays the same event lines before and after restarts")
    func replayIsTheSameAfterRestarts() throws {
        let directory = try TemporaryDirectory("restored-history")
        let first = try KVODProcess(dataDirectory: directory.appending("data"))
        try writeFirstPart(first.connect())
        let beforeRestart = try replayedLines(first)
        #expect(beforeRestart.count > 60, "the scenario makes events for every observation")

        let second = try first.restart(after: SIGTERM)
        let afterRestart = try replayedLines(second)
        expectEqual(afterRestart, beforeRestart)

        // Writes on restored history: the history is now part packed, part recorded by this process.
        try writeSecondPart(second.connect())
        let mixed = try replayedLines(second)
        #expect(mixed.count > beforeRestart.count)
        let third = try second.restart(after: SIGTERM)
        expectEqual(try replayedLines(third), mixed)
        third.stop()
    }

    /// Creations with every kind of value, sets, array changes, references, a deletion and a re-creation.
    private func writeFirstPart(_ writer: KVOConnection) throws {
        try writer.call("create", ["object": "a1", "values": ["city": "Oslo", "zip": 1]])
        try writer.call("create", ["object": "a2", "values": ["city": "Paris \"centre\"\n", "zip": 2.5, "ok": true]])
        try writer.call("create", ["object": "p", "values": [
            "address": ["$ref": "a1"], "items": [["price": 1]], "n": 0, "text": "é\t😀", "none": .null,
        ]])
        try writer.call("set", ["object": "p", "keyPath": "n", "value": 1])
        try writer.call("set", ["object": "p", "keyPath": "text", "value": ["nested": [1, -2, 1e300, "ключ"]]])
        try writer.call("insert", ["object": "p", "keyPath": "items", "index": 0, "values": [["price": 2], ["price": 3]]])
        try writer.call("replace", ["object": "p", "keyPath": "items", "indexes": [1], "values": [["price": 4]]])
        try writer.call("remove", ["object": "p", "keyPath": "items", "indexes": [0]])
        try writer.call("set", ["object": "a1", "keyPath": "city", "value": "Bergen"])
        try writer.call("set", ["object": "p", "keyPath": "address", "value": ["$ref": "a2"]])
        try writer.call("set", ["object": "a2", "keyPath": "city", "value": "Rome"])
        try writer.call("delete", ["object": "a2"])
        try writer.call("create", ["object": "a2", "values": ["city": "Lyon"]])
        try writer.call("set", ["object": "p", "keyPath": "none", "value": false])
    }

    private func writeSecondPart(_ writer: KVOConnection) throws {
        try writer.call("set", ["object": "p", "keyPath": "n", "value": 2])
        try writer.call("insert", ["object": "p", "keyPath": "items", "index": 1, "values": [["price": 5]]])
        try writer.call("set", ["object": "a2", "keyPath": "city", "value": "Nice"])
        try writer.call("delete", ["object": "a1"])
        try writer.call("create", ["object": "a3", "values": ["city": "Turku"]])
    }

    /// Every event line that observers resuming from each revision receive, with the subscription ids
    /// replaced by `_` (each connection's ids are its own, not part of what is compared).
    private func replayedLines(_ server: KVODProcess) throws -> [String] {
        let observer = LineClient(try server.connect())
        var lines: [String] = []
        let keyPaths = ["n", "text", "none", "items", "items.@sum.price", "items.price", "address.city", "address"]
        let current = try observer.call("get", ["object": "p", "keyPath": "n"])["rev"]?.intValue ?? 0
        for since in 0..<current {
            var requests: [[String: JSONValue]] = keyPaths.map {
                ["object": "p", "keyPath": .string($0), "options": ["new", "old", "prior"], "sinceRev": .int(since)]
            }
            requests.append(["object": "a2", "keyPath": "city", "options": ["new", "old"], "sinceRev": .int(since)])
            requests.append(["pattern": "a*", "sinceRev": .int(since)])
            requests.append(["pattern": "a*", "keyPath": "city", "options": ["new", "old", "prior"], "sinceRev": .int(since)])
            for request in requests {
                let reply = try observer.roundTrip("observe", request)
                lines.append("observe \(JSONWriter.string(.object(request))) -> ok=\(reply["ok"] ?? .null) rev=\(reply["rev"] ?? .null)")
                for line in try observer.takeEvents() {
                    lines.append(String(decoding: line, as: UTF8.self)
                        .replacingOccurrences(of: "\"sub\":[0-9]+", with: "\"sub\":_", options: .regularExpression))
                }
                if let sub = reply["sub"] { try observer.call("unobserve", ["sub": sub]) }
            }
        }
        return lines
    }
}
