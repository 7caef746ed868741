import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Bindings through the real kvod over TCP: `bind` with filter, convert and now, `combineLatest`, the
/// order of the events one request causes (the write's own, then each binding write's with its own
/// revision, then the reply), equal values not written, cycle refusal (direct, through other bindings,
/// through a reference and through computed properties) creating nothing, request errors, `unbind`
/// twice, removal when a source or the target is deleted with the event to the creator only, a refused
/// binding write reported to the creator, and the `bindings` listing.
@Suite struct BindingsOverTCPTests {
    private static func endpoint(_ object: String, _ keyPath: String) -> JSONValue {
        ["object": .string(object), "keyPath": .string(keyPath)]
    }

    /// Checks what `get` with `params` answers: `value` at revision `rev`.
    private func expectGet(_ connection: KVOConnection, _ params: [String: JSONValue], value: JSONValue, rev: JSONValue?,
                           sourceLocation: SourceLocation = #_sourceLocation) throws {
        let reply = try connection.call("get", params)
        #expect(reply["value"] == value, "\(params): \(reply)", sourceLocation: sourceLocation)
        #expect(reply["rev"] == rev, "\(params): \(reply)", sourceLocation: sourceLocation)
    }

    /// Sends `bind` from `from` to `to` (each "object:keyPath") with the extra members given.
    private func bind(_ connection: KVOConnection, _ from: String, _ to: String,
                      _ extra: [String: JSONValue] = [:]) throws -> JSONValue {
        var params = extra
        let source = from.split(separator: ":", maxSplits: 1).map(String.init)
        let target = to.split(separator: ":", maxSplits: 1).map(String.init)
        params["from"] = Self.endpoint(source[0], source[1])
        params["to"] = Self.endpoint(target[0], target[1])
        return try connection.request("bind", params)
    }

    @Test("bind with filter, convert and now: applied at once, on each change, and not when the filter says no")
    func bindFilterConvertNow() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        let observer = try server.connect()
        try client.call("create", ["object": "a", "values": ["x": 3]])
        try client.call("create", ["object": "b", "values": ["y": 0]])
        let sub = try #require(try observer.call("observe", ["object": "b", "keyPath": "y", "options": ["new", "old"]])["sub"])

        let reply = try bind(client, "a:x", "b:y", ["filter": "$value > 0", "convert": "$value * 2", "now": true])
        expectEqual(reply, ["id": reply["id"]!, "ok": true, "binding": 1, "rev": 3], "now writes b.y at rev 3")
        expectEqual(try client.call("get", ["object": "b", "keyPath": "y"])["value"], 6)
        var event = try #require(try observer.nextEvent(timeout: 5))
        #expect(event == ["event": "change", "sub": sub, "object": "b", "keyPath": "y", "reason": "valueChanged", "rev": 3,
                          "change": ["kind": 1, "old": 0, "new": 6]])

        expectEqual(try client.call("set", ["object": "a", "keyPath": "x", "value": 5])["rev"], 4)
        try expectGet(client, ["object": "b", "keyPath": "y"], value: 10, rev: 5)
        event = try #require(try observer.nextEvent(timeout: 5))
        #expect(event["rev"] == 5 && event["change"] == ["kind": 1, "old": 6, "new": 10])

        // The filter stops -1: nothing written, only a's revision.
        expectEqual(try client.call("set", ["object": "a", "keyPath": "x", "value": -1])["rev"], 6)
        try expectGet(client, ["object": "b", "keyPath": "y"], value: 10, rev: 6)
        try expectNoEvents(observer)
        // `$0` is `$value`.
        let second = try bind(client, "a:x", "b:z", ["convert": "str($0) + '!'", "now": true])
        #expect(second["binding"] == 2 && second["rev"] == 7)
        expectEqual(try client.call("get", ["object": "b", "keyPath": "z"])["value"], "-1!")
        // Without now, nothing is written until the source changes.
        let third = try bind(client, "a:x", "b:w")
        #expect(third["binding"] == 3 && third["rev"] == 7)
        expectEqual(try client.call("get", ["object": "b", "keyPath": "w"])["value"], .null)
    }

    @Test("a value equal to the target's is not written: no revision, no event")
    func equalValuesAreNotWritten() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        let observer = try server.connect()
        try client.call("create", ["object": "a", "values": ["x": 7]])
        try client.call("create", ["object": "b", "values": ["big": true]])
        try observer.call("observe", ["object": "b", "keyPath": "big", "options": ["new"]])
        let reply = try bind(client, "a:x", "b:big", ["convert": "$value > 5", "now": true])
        expectEqual(reply["rev"], 2, "now with an equal value writes nothing")
        expectEqual(try client.call("set", ["object": "a", "keyPath": "x", "value": 8])["rev"], 3)
        expectEqual(try currentRevision(client, object: "b"), 3)
        try expectNoEvents(observer)
        expectEqual(try client.call("set", ["object": "a", "keyPath": "x", "value": 1])["rev"], 4)
        expectEqual(try currentRevision(client, object: "b"), 5)
        let event = try #require(try observer.nextEvent(timeout: 5))
        #expect(event["rev"] == 5 && event["change"] == ["kind": 1, "new": false])
    }

    @Test("combineLatest reduces every source's current value whenever one changes; filter applies")
    func combineLatest() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        try client.call("create", ["object": "a", "values": ["x": 1]])
        try client.call("create", ["object": "b", "values": [:]])
        try client.call("create", ["object": "c", "values": ["sum": 0]])
        let sources: JSONValue = [Self.endpoint("a", "x"), Self.endpoint("b", "y")]
        let reply = try client.request("combineLatest", [
            "sources": sources, "to": Self.endpoint("c", "sum"), "reduce": "$0 + $1",
            "filter": "$0 != null && $1 != null", "now": true,
        ])
        expectEqual(reply, ["id": reply["id"]!, "ok": true, "binding": 1, "rev": 3], "b.y is null: filtered")
        expectEqual(try client.call("get", ["object": "c", "keyPath": "sum"])["value"], 0)
        expectEqual(try client.call("set", ["object": "b", "keyPath": "y", "value": 40])["rev"], 4)
        try expectGet(client, ["object": "c", "keyPath": "sum"], value: 41, rev: 5)
        expectEqual(try client.call("set", ["object": "a", "keyPath": "x", "value": 2])["rev"], 6)
        try expectGet(client, ["object": "c", "keyPath": "sum"], value: 42, rev: 7)
        // Three sources, with a string reduction.
        let three = try client.request("combineLatest", [
            "sources": [Self.endpoint("a", "x"), Self.endpoint("b", "y"), Self.endpoint("c", "sum")],
            "to": Self.endpoint("c", "text"), "reduce": "$0 + '/' + $1 + '/' + $2", "now": true,
        ])
        #expect(three["binding"] == 2 && three["rev"] == 8)
        expectEqual(try client.call("get", ["object": "c", "keyPath": "text"])["value"], "2/40/42")
        // One write to a.x: sum then text follow, each with its own revision.
        expectEqual(try client.call("set", ["object": "a", "keyPath": "x", "value": 10])["rev"], 9)
        try expectGet(client, ["object": "c"], value: ["sum": 50, "text": "10/40/50"], rev: 11)
    }

    @Test("one request's events: the write's, then each binding write's at its own revision, all before the reply")
    func eventOrderWithinOneRequest() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        let other = try server.connect()
        try client.call("create", ["object": "a", "values": ["x": 0]])
        try client.call("create", ["object": "b", "values": ["y": 0]])
        try client.call("create", ["object": "c", "values": ["z": 0]])
        expectEqual(try bind(client, "a:x", "b:y", ["convert": "$value + 1"])["binding"], 1)
        expectEqual(try bind(client, "b:y", "c:z", ["convert": "$value * 10"])["binding"], 2)
        for connection in [client, other] {
            for (object, keyPath) in [("c", "z"), ("b", "y"), ("a", "x")] {
                try connection.call("observe", ["object": .string(object), "keyPath": .string(keyPath), "options": ["new"]])
            }
        }
        let reply = try client.request("set", ["object": "a", "keyPath": "x", "value": 4])
        // Every event reached the writer before its reply: queued by `request` while it waited.
        let queued = client.pendingEvents
        expectEqual(reply["rev"], 4, "the reply carries the write's own revision: \(reply)")
        let expected: [(String, String, JSONValue, JSONValue)] = [("a", "x", 4, 4), ("b", "y", 5, 5), ("c", "z", 50, 6)]
        expectEqual(queued.count, 3, "\(queued)")
        for (event, (object, keyPath, value, rev)) in zip(queued, expected) {
            #expect(event["object"] == .string(object) && event["keyPath"] == .string(keyPath), "\(event)")
            #expect(event["change"] == ["kind": 1, "new": value] && event["rev"] == rev, "\(event)")
        }
        let seen = try drainEvents(other)
        expectEqual(seen.map { $0["keyPath"] }, ["x", "y", "z"])
        expectEqual(seen.map { $0["rev"] }, [4, 5, 6])
        expectEqual(try currentRevision(client, object: "a"), 6)
    }

    @Test("a binding that could trigger itself is a cycle and nothing is created", arguments: [
        "direct", "two bindings", "three bindings", "combineLatest", "through a reference",
        "through a computed property", "through a computed property and another binding",
    ])
    func cyclesAreRefused(shape: String) throws {
        let server = try KVODProcess()
        let client = try server.connect()
        try client.call("defineClass", ["class": json(#"{"name":"C","properties":{"x":{"type":"number"}},"computed":{"double":"x * 2"}}"#)])
        try client.call("create", ["object": "a", "values": ["x": 1, "y": 1]])
        try client.call("create", ["object": "b", "values": ["x": 1]])
        try client.call("create", ["object": "d", "values": ["x": 1]])
        try client.call("create", ["object": "c", "class": "C", "values": ["x": 1]])
        try client.call("create", ["object": "r", "values": ["to": ["$ref": "a"]]])
        // Bindings made first (none of them a cycle), then the one that closes the loop.
        let setup: [(String, String)] = switch shape {
        case "two bindings": [("a:x", "b:x")]
        case "three bindings": [("a:x", "b:x"), ("b:x", "d:x")]
        case "through a computed property and another binding": [("c:double", "d:x")]
        default: []
        }
        var ids: [JSONValue] = []
        for (from, to) in setup {
            let reply = try bind(client, from, to)
            expectEqual(reply["ok"], true, "\(from) -> \(to): \(reply)")
            ids.append(reply["binding"] ?? .null)
        }
        let rev = try currentRevision(client, object: "a")
        let refused: JSONValue
        switch shape {
        case "direct": refused = try bind(client, "a:x", "a:x", ["now": true])
        case "two bindings": refused = try bind(client, "b:x", "a:x", ["now": true])
        case "three bindings": refused = try bind(client, "d:x", "a:x", ["now": true])
        case "combineLatest":
            refused = try client.request("combineLatest", [
                "sources": [Self.endpoint("a", "x"), Self.endpoint("b", "x")], "to": Self.endpoint("b", "x"),
                "reduce": "$0 + $1", "now": true,
            ])
        case "through a reference": refused = try bind(client, "a:x", "r:to.x", ["now": true])
        case "through a computed property": refused = try bind(client, "c:double", "c:x", ["now": true])
        default: refused = try bind(client, "d:x", "c:x", ["convert": "$value + 1", "now": true])
        }
        expectError(refused, code: "cycle", shape)
        let listed = try client.call("bindings")["bindings"]?.arrayValue ?? []
        expectEqual(listed.map { $0["binding"] ?? .null }, ids, "\(shape): only the setup bindings exist")
        expectEqual(try currentRevision(client, object: "a"), rev, "\(shape): nothing written")
        // A binding made afterwards works and is not cyclic.
        let fine = try bind(client, "a:y", "d:y")
        expectEqual(fine["ok"], true, "\(fine)")
    }

    @Test("bind and combineLatest refuse missing objects, operator and read-only targets and bad expressions")
    func requestErrors() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        try client.call("defineClass", ["class": json(#"{"name":"C","properties":{"x":{"type":"number"}},"computed":{"double":"x * 2"}}"#)])
        try client.call("create", ["object": "a", "values": ["x": 1, "items": [1]]])
        try client.call("create", ["object": "c", "class": "C", "values": ["x": 1]])
        expectError(try bind(client, "missing:x", "a:y"), code: "not_found")
        expectError(try bind(client, "a:x", "missing:y"), code: "not_found")
        expectError(try bind(client, "a:x", "a:items.@count"), code: "bad_request")
        expectError(try bind(client, "a:x", "c:double"), code: "read_only", property: "double")
        expectError(try bind(client, "a:x", "c:$class"), code: "read_only", property: "$class")
        expectError(try bind(client, "a:x", "a:y", ["convert": "x + 1"]), code: "invalid_expression")
        expectError(try bind(client, "a:x", "a:y", ["filter": "$value >"]), code: "invalid_expression")
        expectError(try bind(client, "a:x", "a:y", ["convert": "$1"]), code: "invalid_expression")
        expectError(try bind(client, "a:x", "a:y", ["convert": 5]), code: "bad_request")
        expectError(try client.request("combineLatest", [
            "sources": [Self.endpoint("a", "x"), Self.endpoint("c", "x")], "to": Self.endpoint("a", "y"), "reduce": "$0 + $2",
        ]), code: "invalid_expression")
        expectError(try client.request("combineLatest", [
            "sources": [Self.endpoint("a", "x")], "to": Self.endpoint("a", "y"),
        ]), code: "bad_request")
        expectError(try client.request("combineLatest", [
            "sources": [], "to": Self.endpoint("a", "y"), "reduce": "$0",
        ]), code: "bad_request")
        expectError(try client.request("unbind", ["binding": "one"]), code: "bad_request")
        expectEqual(try client.call("bindings")["bindings"], [])
        // A computed property is a fine source.
        let reply = try bind(client, "c:double", "a:y", ["now": true])
        expectEqual(reply["binding"], 1, "\(reply)")
        try client.call("set", ["object": "c", "keyPath": "x", "value": 21])
        expectEqual(try client.call("get", ["object": "a", "keyPath": "y"])["value"], 42)
    }

    @Test("unbind removes once (true, then false) and the source no longer drives the target")
    func unbindTwice() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        try client.call("create", ["object": "a", "values": ["x": 1]])
        try client.call("create", ["object": "b", "values": ["y": 0]])
        let id = try #require(try bind(client, "a:x", "b:y")["binding"])
        try client.call("set", ["object": "a", "keyPath": "x", "value": 2])
        expectEqual(try client.call("get", ["object": "b", "keyPath": "y"])["value"], 2)
        expectEqual(try client.call("unbind", ["binding": id])["removed"], true)
        expectEqual(try client.call("unbind", ["binding": id])["removed"], false)
        expectEqual(try client.call("unbind", ["binding": 999])["removed"], false)
        try client.call("set", ["object": "a", "keyPath": "x", "value": 3])
        expectEqual(try client.call("get", ["object": "b", "keyPath": "y"])["value"], 2)
        expectEqual(try client.call("bindings")["bindings"], [])
        // Ids are not reused.
        expectEqual(try bind(client, "a:x", "b:y")["binding"], .int((id.intValue ?? 0) + 1))
    }

    @Test("deleting a source or the target removes the binding and tells its creator only", arguments: ["source", "target"])
    func removalOnDelete(deleted: String) throws {
        let server = try KVODProcess()
        let creator = try server.connect()
        let other = try server.connect()
        let bystander = try server.connect()
        try creator.call("create", ["object": "a", "values": ["x": 1]])
        try creator.call("create", ["object": "b", "values": ["y": 0]])
        try creator.call("create", ["object": "k", "values": ["v": 0]])
        let id = try #require(try bind(creator, "a:x", "b:y")["binding"])
        // A second binding not involving the deleted object survives.
        let survivor = try #require(try bind(creator, "k:v", deleted == "source" ? "b:w" : "a:w")["binding"])
        try bystander.call("observe", ["object": "k", "keyPath": "v"])
        let object = deleted == "source" ? "a" : "b"
        let rev = try other.call("delete", ["object": .string(object)])["rev"]
        let event = try #require(try creator.nextEvent(timeout: 5))
        #expect(event == ["event": "binding", "binding": id, "reason": "removed",
                          "cause": .string(deleted == "source" ? "sourceDeleted" : "targetDeleted"),
                          "object": .string(object), "rev": rev ?? .null])
        try expectNoEvents(creator)
        try expectNoEvents(other, "the deleting connection is not the creator")
        try expectNoEvents(bystander)
        let listed = try creator.call("bindings")["bindings"]?.arrayValue ?? []
        expectEqual(listed.map { $0["binding"] }, [survivor])
        // Re-creating the object does not bring the binding back.
        try other.call("create", ["object": .string(object), "values": ["x": 5, "y": 0]])
        try other.call("set", ["object": "a", "keyPath": "x", "value": 6])
        expectEqual(try other.call("get", ["object": "b", "keyPath": "y"])["value"], 0)
    }

    @Test("the creator deleting its own source gets the removal event before the delete's reply")
    func creatorDeletesItsSource() throws {
        let server = try KVODProcess()
        let creator = try server.connect()
        try creator.call("create", ["object": "a", "values": ["x": 1]])
        try creator.call("create", ["object": "b", "values": ["y": 0]])
        let id = try #require(try bind(creator, "a:x", "b:y")["binding"])
        let rev = try creator.call("delete", ["object": "a"])["rev"]
        #expect(creator.pendingEvents == [["event": "binding", "binding": id, "reason": "removed",
                                           "cause": "sourceDeleted", "object": "a", "rev": rev ?? .null]])
    }

    @Test("a refused binding write is not applied; the creator gets a refused event with invalid_value; the server logs it")
    func refusedWrite() throws {
        let server = try KVODProcess()
        let creator = try server.connect()
        let writer = try server.connect()
        let observer = try server.connect()
        try creator.call("defineClass", ["class": json(#"{"name":"Item","properties":{"qty":{"type":"integer","min":0,"max":10}}}"#)])
        try creator.call("create", ["object": "a", "values": ["x": 1]])
        try creator.call("create", ["object": "i1", "class": "Item", "values": ["qty": 1]])
        let id = try #require(try bind(creator, "a:x", "i1:qty")["binding"])
        try observer.call("observe", ["object": "i1", "keyPath": "qty"])
        let rev = try #require(try writer.call("set", ["object": "a", "keyPath": "x", "value": 50])["rev"])
        let event = try #require(try creator.nextEvent(timeout: 5))
        #expect(event["event"] == "binding" && event["binding"] == id && event["reason"] == "refused" && event["rev"] == rev, "\(event)")
        expectEqual(event["error"]?["code"], "invalid_value", "\(event)")
        #expect(event["error"]?["property"] == "qty" && event["error"]?["rule"] == "max", "\(event)")
        expectEqual(event["error"]?["message"]?.stringValue?.isEmpty, false)
        expectEqual(event.objectValue?.keys.sorted(), ["binding", "error", "event", "reason", "rev"])
        try expectGet(writer, ["object": "i1", "keyPath": "qty"], value: 1, rev: rev)
        try expectNoEvents(writer)
        try expectNoEvents(observer)
        #expect(server.waitForLog("binding \(id) write refused"), "\(server.log)")
        // The binding still works for valid values.
        let next = try #require(try writer.call("set", ["object": "a", "keyPath": "x", "value": 7])["rev"]?.intValue)
        try expectGet(writer, ["object": "i1", "keyPath": "qty"], value: 7, rev: .int(next + 1))
        try expectNoEvents(creator)
    }

    @Test("a refused write with now, and a target path that does not resolve: the binding exists, the creator is told before the reply")
    func refusedAtOnce() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        try client.call("defineClass", ["class": json(#"{"name":"Item","properties":{"qty":{"type":"integer","max":10}}}"#)])
        try client.call("create", ["object": "a", "values": ["x": 50]])
        try client.call("create", ["object": "i", "class": "Item", "values": ["qty": 1]])
        let reply = try bind(client, "a:x", "i:qty", ["now": true])
        #expect(reply["binding"] == 1 && reply["rev"] == 2, "\(reply)")
        #expect(client.pendingEvents == [[
            "event": "binding", "binding": 1, "reason": "refused", "rev": 2,
            "error": ["code": "invalid_value", "message": "'qty' must be at most 10 (got 50)", "property": "qty", "rule": "max"],
        ]])
        _ = try drainEvents(client)
        let broken = try bind(client, "a:x", "i:nested.deep", ["now": true])
        #expect(broken["binding"] == 2 && broken["rev"] == 2, "\(broken)")
        let events = try drainEvents(client)
        #expect(events.count == 1 && events.first?["binding"] == 2 && events.first?["reason"] == "refused", "\(events)")
        expectEqual(events.first?["error"]?["code"], "not_found", "\(events)")
        // Within range, the first binding writes.
        try client.call("set", ["object": "a", "keyPath": "x", "value": 9])
        expectEqual(try client.call("get", ["object": "i", "keyPath": "qty"])["value"], 9)
    }

    @Test("a binding outlives its creator's connection: it still applies and is still removed with its source")
    func creatorDisconnects() throws {
        let server = try KVODProcess()
        let creator = try server.connect()
        let other = try server.connect()
        try creator.call("create", ["object": "s", "values": ["v": 1]])
        try creator.call("create", ["object": "t", "values": ["v": 0]])
        let id = try #require(try bind(creator, "s:v", "t:v")["binding"])
        creator.close()
        try other.call("set", ["object": "s", "keyPath": "v", "value": 7])
        expectEqual(try other.call("get", ["object": "t", "keyPath": "v"])["value"], 7)
        try other.call("delete", ["object": "s"])
        try expectNoEvents(other)
        expectEqual(try other.call("bindings")["bindings"], [])
        #expect(server.waitForLog("binding \(id) removed: sourceDeleted (s)"), "\(server.log)")
    }

    @Test("bindings lists every binding's definition with its id and kind, by id")
    func listing() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        try client.call("create", ["object": "a", "values": ["x": 1]])
        try client.call("create", ["object": "b", "values": ["y": 2]])
        _ = try bind(client, "a:x", "b:copy")
        _ = try bind(client, "a:x", "b:double", ["filter": "$value != null", "convert": "$value * 2"])
        try client.call("combineLatest", [
            "sources": [Self.endpoint("a", "x"), Self.endpoint("b", "y")], "to": Self.endpoint("b", "sum"),
            "reduce": "$0 + $1", "filter": "$0 > 0",
        ])
        try client.call("combineLatest", [
            "sources": [Self.endpoint("a", "x")], "to": Self.endpoint("b", "neg"), "reduce": "-$0",
        ])
        try client.call("unbind", ["binding": 1])
        let listed = try client.call("bindings")["bindings"]
        #expect(listed == [
            ["binding": 2, "kind": "bind", "from": Self.endpoint("a", "x"), "to": Self.endpoint("b", "double"),
             "filter": "$value != null", "convert": "$value * 2"],
            ["binding": 3, "kind": "combineLatest", "sources": [Self.endpoint("a", "x"), Self.endpoint("b", "y")],
             "to": Self.endpoint("b", "sum"), "reduce": "$0 + $1", "filter": "$0 > 0"],
            ["binding": 4, "kind": "combineLatest", "sources": [Self.endpoint("a", "x")], "to": Self.endpoint("b", "neg"),
             "reduce": "-$0"],
        ])
    }
}
