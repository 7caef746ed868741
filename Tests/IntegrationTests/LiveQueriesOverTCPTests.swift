import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Live queries (pattern observations with `where`, docs/protocol.md "Live queries") against the real kvod
/// over TCP: `entered`, changes inside, `left` (also on delete), `initial`, compact codes, `info`, resuming
/// with `resync`, hostile filters (malformed, oversized, too deep, too much work per evaluation) refused or
/// bounded with the connection serving on, and random writes against a brute-force reference.
@Suite struct LiveQueriesOverTCPTests {
    private func events(_ client: KVOConnection) throws -> [JSONValue] { try PatternEventSummary.events(client) }

    private func summary(_ event: JSONValue) -> String { PatternEventSummary.line(event) }

    @Test func ordersEnterAndLeaveAnOpenOrdersQuery() throws {
        let server = try KVODProcess()
        let writer = try server.connect()
        let client = try server.connect()
        try writer.call("create", ["object": "order:1", "values": ["status": "open", "total": 150]])
        try writer.call("create", ["object": "order:2", "values": ["status": "open", "total": 50]])
        let filter: JSONValue = "status == 'open' && total > 100"
        let ids = try client.call("observe", ["pattern": "order:*", "where": filter, "options": ["initial"]])["sub"]
        let totals = try client.call("observe", ["pattern": "order:*", "keyPath": "total", "where": filter,
                                                 "options": ["initial", "new", "old"]])["sub"]
        try writer.call("set", ["object": "order:2", "keyPath": "total", "value": 120])
        try writer.call("set", ["object": "order:1", "keyPath": "total", "value": 160])
        try writer.call("set", ["object": "order:1", "keyPath": "status", "value": "closed"])
        try writer.call("batch", ["ops": [
            ["op": "create", "object": "order:3", "values": ["status": "open", "total": 500]],
            ["op": "delete", "object": "order:2"],
        ]])
        let heard = try events(client)
        #expect(heard.filter { $0["sub"] == ids }.map(summary) == [
            #"initial - new=["order:1"]"#, "entered order:2", "left order:1", "entered order:3", "left order:2",
        ])
        #expect(heard.filter { $0["sub"] == totals }.map(summary) == [
            "initial order:1 new=150", "entered order:2 new=120 old=null", "valueChanged order:1 new=160 old=150",
            "left order:1 new=null old=160", "entered order:3 new=500 old=null", "left order:2 new=null old=120",
        ])
        let observers = try writer.call("info", ["object": "order:3"])["observers"]?.arrayValue ?? []
        expectEqual(observers.map { $0["where"] }, [filter, filter])
        // Resuming a live query replays what it missed, as it was heard live.
        let resumed = try client.call("observe", ["pattern": "order:*", "where": filter, "sinceRev": 1])["sub"]
        #expect(try events(client).filter { $0["sub"] == resumed }.map(summary) == [
            "entered order:2", "left order:1", "entered order:3", "left order:2",
        ])
        let resumedTotals = try client.call("observe", ["pattern": "order:*", "keyPath": "total", "where": filter,
                                                        "options": ["new", "old"], "sinceRev": 1])["sub"]
        #expect(try events(client).filter { $0["sub"] == resumedTotals }.map(summary) == [
            "entered order:2 new=120 old=null", "valueChanged order:1 new=160 old=150",
            "left order:1 new=null old=160", "entered order:3 new=500 old=null", "left order:2 new=null old=120",
        ])
    }

    @Test func compactEventsCodeEnteredAndLeft() throws {
        let server = try KVODProcess()
        let client = LineClient(try server.connect())
        try client.call("hello", ["events": "compact"])
        let writer = try server.connect()
        let sub = try client.call("observe", ["pattern": "t-*", "keyPath": "n", "where": "n > 1"])["sub"]!
        try writer.call("create", ["object": "t-1", "values": ["n": 1]])
        try writer.call("set", ["object": "t-1", "keyPath": "n", "value": 2])
        try writer.call("set", ["object": "t-1", "keyPath": "n", "value": 0])
        let lines = try client.takeEvents().map { String(decoding: $0, as: UTF8.self) }
        #expect(lines == [
            #"{"s":\#(sub),"r":2,"t":"t-1","w":"e","n":2}"#,
            #"{"s":\#(sub),"r":3,"t":"t-1","w":"l","n":null}"#,
        ])
    }

    @Test("hostile filters: malformed, huge, deep or costly are refused or bounded, and the connection serves on")
    func hostileFilters() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        let writer = try server.connect()
        try writer.call("create", ["object": "h-1", "values": ["name": .string(String(repeating: "x", count: 200_000)), "n": 1]])
        let refusals: [(JSONValue, [String: JSONValue], String)] = [
            ("bad_request", ["object": "h-1", "keyPath": "n", "where": "n > 0"], "goes with 'pattern'"),
            ("bad_request", ["pattern": "h-*", "where": 7], "'where' must be a string"),
            ("invalid_expression", ["pattern": "h-*", "where": "n >"], "column"),
            ("invalid_expression", ["pattern": "h-*", "where": "$value > 1"], "not variables"),
            ("invalid_expression", ["pattern": "h-*", "where": .string(String(repeating: "n + ", count: 1200) + "n")],
             "longer than"),
            ("invalid_expression", ["pattern": "h-*", "where": .string(String(repeating: "(", count: 100) + "n"
                                                                          + String(repeating: ")", count: 100))],
             "nest"),
        ]
        for (code, params, message) in refusals {
            let reply = try client.request("observe", params)
            expectEqual(reply["error"]?["code"], code, "\(params): \(reply)")
            let text = reply["error"]?["message"]?.stringValue ?? ""
            #expect(text.contains(message), "\(reply)")
            _ = try client.call("ping")  // the connection serves on
        }
        expectEqual(try writer.call("info", ["object": "h-1"])["observers"], [], "a refused query subscribed nothing")
        // A filter over its work limit (comparing 200 KB strings) is false, not a stall: the object is not in the set.
        let costly = try client.call("observe", ["pattern": "h-*", "where": "name + name == name + 'y'",
                                                 "options": ["initial"]])["sub"]
        let cheap = try client.call("observe", ["pattern": "h-*", "where": "n > 0", "options": ["initial"]])["sub"]
        let started = Date()
        for value in 2...50 { try writer.call("set", ["object": "h-1", "keyPath": "n", "value": .int(Int64(value))]) }
        #expect(Date().timeIntervalSince(started) < 20, "49 writes with a costly filter took too long")
        let heard = try events(client)
        expectEqual(heard.filter { $0["sub"] == costly }.map(summary), [#"initial - new=[]"#])
        expectEqual(heard.filter { $0["sub"] == cheap }.map(summary), [#"initial - new=["h-1"]"#])
    }

    /// A brute-force reference: after each write, every query's set is recomputed from the test's copy of
    /// the store, and the events must be exactly the differences.
    @Test func randomWritesMatchABruteForceReference() throws {
        let server = try KVODProcess()
        let writer = try server.connect()
        let client = try server.connect()
        let queries: [(pattern: String, keyPath: String?, filter: String, holds: ([String: JSONValue]) -> Bool)] = [
            ("p:*", nil, "kind == 'a' && size >= 3", { $0["kind"] == "a" && ($0["size"]?.intValue ?? 0) >= 3 }),
            ("*", "size", "size % 2 == 1", { ($0["size"]?.intValue).map { $0 % 2 != 0 } ?? false }),
            ("p:*", "kind", "kind != 'c' || size == 0", { $0["kind"] != "c" || $0["size"] == 0 }),
        ]
        var subs: [JSONValue] = []
        for query in queries {
            var params: [String: JSONValue] = ["pattern": .string(query.pattern), "where": .string(query.filter),
                                               "options": ["new", "old"]]
            if let keyPath = query.keyPath { params["keyPath"] = .string(keyPath) }
            subs.append(try client.call("observe", params)["sub"]!)
        }
        var random = SplitMix64(state: 42)
        let ids = ["p:1", "p:2", "p:3", "p:4", "q:1"]
        var store: [String: [String: JSONValue]] = [:]
        func state(_ q: Int, _ id: String) -> (Bool, JSONValue) {
            let query = queries[q]
            guard let values = store[id], query.pattern == "*" || id.hasPrefix("p:"), query.holds(values) else { return (false, .null) }
            return (true, query.keyPath.map { values[$0] ?? .null } ?? .null)
        }
        for step in 0..<150 {
            let id = ids[random.below(ids.count)]
            let before = (0..<queries.count).map { state($0, id) }
            if store[id] == nil {
                let values: [String: JSONValue] = ["kind": .string(["a", "b", "c"][random.below(3)]),
                                                   "size": .int(Int64(random.below(6)))]
                try writer.call("create", ["object": .string(id), "values": .object(values)])
                store[id] = values
            } else if random.below(6) == 0 {
                try writer.call("delete", ["object": .string(id)])
                store[id] = nil
            } else {
                let key = ["kind", "size", "other"][random.below(3)]
                let value: JSONValue = key == "size" ? .int(Int64(random.below(6))) : .string(["a", "b", "c"][random.below(3)])
                try writer.call("set", ["object": .string(id), "keyPath": .string(key), "value": value])
                store[id]![key] = value
            }
            let heard = try events(client)
            for (q, sub) in subs.enumerated() {
                let (was, old) = before[q]
                let (isIn, new) = state(q, id)
                var expected: [String] = []
                let valued = queries[q].keyPath != nil
                switch (was, isIn) {
                case (false, true): expected = [valued ? "entered \(id) new=\(new) old=null" : "entered \(id)"]
                case (true, false): expected = [valued ? "left \(id) new=null old=\(old)" : "left \(id)"]
                case (true, true) where valued && old != new: expected = ["valueChanged \(id) new=\(new) old=\(old)"]
                default: break
                }
                expectEqual(heard.filter { $0["sub"] == sub }.map(summary), expected, "step \(step) query \(q)")
            }
        }
    }
}
