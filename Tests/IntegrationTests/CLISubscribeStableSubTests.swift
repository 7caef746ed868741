import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// `kvoclient subscribe --json` across a kvod restart: the server numbers subscriptions anew on every
/// connection, and the subscriber re-observes; each printed `sub` must still mean the key path it
/// meant before (the first connection's number).
@Suite("kvoclient subscribe --json sub ids")
struct CLISubscribeStableSubTests {
    @Test("each key path keeps its sub across a kvod restart, even when the new server numbers them differently")
    func subStaysWithItsKeyPath() throws {
        let directory = try TemporaryDirectory("stable-sub")
        let server = try KVODProcess(dataDirectory: directory.appending("data"))
        let writer = try server.connect()
        try writer.call("create", ["object": "doc", "values": ["items": [], "date": "2026-11-20"]])
        let subscriber = try KVOClientProcess.start(server, ["subscribe", "doc", "items", "date", "--json", "--count", "4"])
        let observers = try waitForObservers(writer, object: "doc", count: 2)
        expectEqual(observers.count, 2)
        try writer.call("insert", ["object": "doc", "keyPath": "items", "values": ["milk"]])
        try writer.call("set", ["object": "doc", "keyPath": "date", "value": "2026-11-21"])
        var events: [JSONValue] = []
        for _ in 0..<2 { if let line = subscriber.nextLine() { events.append(try JSONParser.parse(line)) } }
        // Held while kvod restarts, so that another client observes first on the new server and the
        // subscriber's key paths get other numbers there.
        subscriber.send(signal: SIGSTOP)
        let restarted = try server.restart()
        let other = try restarted.connect()
        let otherSub = try other.call("observe", ["object": "doc", "keyPath": "date"])["sub"]
        subscriber.send(signal: SIGCONT)
        _ = try waitForObservers(other, object: "doc", count: 3)
        let serverSubs = (try other.call("info", ["object": "doc"])["observers"]?.arrayValue ?? []).filter { $0["sub"] != otherSub }
        expectEqual(serverSubs.count, 2)
        try other.call("set", ["object": "doc", "keyPath": "date", "value": "2026-11-22"])
        try other.call("insert", ["object": "doc", "keyPath": "items", "values": ["eggs"]])
        for _ in 0..<2 { if let line = subscriber.nextLine() { events.append(try JSONParser.parse(line)) } }
        let result = subscriber.finish()
        expectEqual(result.status, 0, "\(result.stderr)")
        expectEqual(events.count, 4)
        // The new server gave the subscriber's key paths numbers other than the first ones …
        let firstSubs = Dictionary(events.prefix(2).map { ($0["keyPath"]?.stringValue ?? "?", $0["sub"]) }, uniquingKeysWith: { a, _ in a })
        let renumbered = serverSubs.filter { $0["sub"] != firstSubs[$0["keyPath"]?.stringValue ?? "?"] ?? nil }
        #expect(!renumbered.isEmpty, "the scenario must renumber: \(serverSubs) vs \(firstSubs)")
        // … and every printed event still carries its key path's first number.
        for event in events {
            let keyPath = event["keyPath"]?.stringValue ?? "?"
            #expect(event["sub"] == firstSubs[keyPath] ?? nil, "\(event)")
        }
        expectEqual(Set(events.map { $0["keyPath"]?.stringValue ?? "?" }), ["items", "date"])
    }
}
