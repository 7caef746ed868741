import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Classes, computed properties and bindings across kvod restarts on the same data directory: the
/// definitions come back (`classes`, `bindings`), validation, computed observation and binding
/// application still work, a new binding never reuses an id (even one unbound before the restart), an
/// acknowledged `defineClass`, `bind` or `unbind` survives SIGKILL, and binding writes and computed
/// values are replayed to an observer resuming with `sinceRev`.
@Suite struct ClassesDurabilityTests {
    static let person = #"""
        {"name":"Person","properties":{"first":{"type":"string","required":true},"last":{"type":"string","default":"Doe"},
         "age":{"type":"integer","min":0,"max":150}},"computed":{"fullName":"first + ' ' + last"}}
        """#

    private static func endpoint(_ object: String, _ keyPath: String) -> JSONValue {
        ["object": .string(object), "keyPath": .string(keyPath)]
    }

    @Test("after a restart, classes, bindings, validation, computed observation and binding application all work",
          arguments: [SIGTERM, SIGKILL])
    func everythingSurvivesARestart(signal: Int32) throws {
        let directory = try TemporaryDirectory("classes-restart")
        let server = try KVODProcess(dataDirectory: directory.appending("data"))
        let client = try server.connect()
        try client.call("defineClass", ["class": json(Self.person)])
        try client.call("create", ["object": "p1", "class": "Person", "values": ["first": "Ada", "age": 36]])
        try client.call("create", ["object": "card", "values": ["title": ""]])
        let first = try client.call("bind", [
            "from": Self.endpoint("p1", "fullName"), "to": Self.endpoint("card", "title"),
            "convert": "upper($value)", "now": true,
        ])
        #expect(first["binding"] == 1 && first["rev"] == 3)
        let second = try client.call("combineLatest", [
            "sources": [Self.endpoint("p1", "age"), Self.endpoint("card", "title")], "to": Self.endpoint("card", "line"),
            "reduce": "$1 + ' (' + $0 + ')'", "filter": "$0 != null",
        ])
        expectEqual(second["binding"], 2)
        // Binding 3 is made and removed: its id must not come back.
        let third = try client.call("bind", ["from": Self.endpoint("p1", "age"), "to": Self.endpoint("card", "age")])
        expectEqual(third["binding"], 3)
        expectEqual(try client.call("unbind", ["binding": 3])["removed"], true)
        let classesBefore = try client.call("classes")["classes"]
        let bindingsBefore = try client.call("bindings")["bindings"]
        let objectBefore = try client.call("get", ["object": "p1"])
        expectEqual(bindingsBefore?.arrayValue?.count, 2)

        let restarted = try server.restart(after: signal)
        let again = try restarted.connect()
        expectEqual(try again.call("classes")["classes"], classesBefore)
        expectEqual(try again.call("bindings")["bindings"], bindingsBefore)
        let objectAfter = try again.call("get", ["object": "p1"])
        #expect(objectAfter["value"] == objectBefore["value"] && objectAfter["rev"] == objectBefore["rev"])
        expectEqual(try again.call("get", ["object": "p1", "keyPath": "fullName"])["value"], "Ada Doe")
        expectEqual(try again.call("get", ["object": "card", "keyPath": "title"])["value"], "ADA DOE")

        // Validation.
        let refused = try again.request("set", ["object": "p1", "keyPath": "age", "value": 200])
        expectError(refused, code: "invalid_value", property: "age", rule: "max")
        expectError(try again.request("set", ["object": "p1", "keyPath": "fullName", "value": "x"]), code: "read_only", property: "fullName")
        expectError(try again.request("create", ["object": "p2", "class": "Person", "values": [:]]),
                    code: "invalid_value", property: "first", rule: "required")
        // Computed observation and both bindings.
        let observer = try restarted.connect()
        let sub = try #require(try observer.call("observe", ["object": "p1", "keyPath": "fullName", "options": ["old", "new"]])["sub"])
        let rev = try #require(try again.call("set", ["object": "p1", "keyPath": "last", "value": "King"])["rev"]?.intValue)
        let event = try #require(try observer.nextEvent(timeout: 5))
        #expect(event == ["event": "change", "sub": sub, "object": "p1", "keyPath": "fullName", "reason": "valueChanged",
                          "rev": .int(rev), "change": ["kind": 1, "old": "Ada Doe", "new": "Ada King"]])
        expectEqual(try again.call("get", ["object": "card"])["value"], ["title": "ADA KING", "line": "ADA KING (36)"])
        expectEqual(try again.call("get", ["object": "card"])["rev"], .int(rev + 2))
        // A new binding gets a new id (4: 3 was used before the restart).
        let fourth = try again.call("bind", ["from": Self.endpoint("p1", "age"), "to": Self.endpoint("card", "age"), "now": true])
        expectEqual(fourth["binding"], 4)
        expectEqual(try again.call("get", ["object": "card", "keyPath": "age"])["value"], 36)
        // Restored bindings still clean up when their source is deleted.
        try again.call("delete", ["object": "p1"])
        expectEqual(try again.call("bindings")["bindings"]?.arrayValue?.map { $0["binding"] }, [])
    }

    @Test("an acknowledged defineClass, bind and unbind, with no object write after them, survive SIGKILL")
    func definitionsAloneSurviveSIGKILL() throws {
        let directory = try TemporaryDirectory("classes-sigkill")
        let server = try KVODProcess(dataDirectory: directory.appending("data"))
        let client = try server.connect()
        try client.call("create", ["object": "a", "values": ["x": 1]])
        try client.call("create", ["object": "b", "values": ["y": 1]])
        try client.call("bind", ["from": Self.endpoint("a", "x"), "to": Self.endpoint("b", "old")])
        try client.call("bind", ["from": Self.endpoint("a", "x"), "to": Self.endpoint("b", "y")])
        var restarted = try server.restart(after: SIGKILL)
        var again = try restarted.connect()
        expectEqual(try again.call("bindings")["bindings"]?.arrayValue?.map { $0["binding"] }, [1, 2])

        // defineClass and unbind, each the last thing before the kill.
        try again.call("defineClass", ["class": json(Self.person)])
        restarted = try restarted.restart(after: SIGKILL)
        again = try restarted.connect()
        expectEqual(try again.call("classes")["classes"]?.arrayValue?.map { $0["name"] }, ["Person"])
        expectEqual(try again.call("unbind", ["binding": 2])["removed"], true)
        restarted = try restarted.restart(after: SIGKILL)
        again = try restarted.connect()
        expectEqual(try again.call("bindings")["bindings"]?.arrayValue?.map { $0["binding"] }, [1])
        expectEqual(try again.call("bind", ["from": Self.endpoint("a", "x"), "to": Self.endpoint("b", "z")])["binding"], 3)
        try again.call("set", ["object": "a", "keyPath": "x", "value": 9])
        expectEqual(try again.call("get", ["object": "b"])["value"], ["y": 1, "old": 9, "z": 9])
    }

    @Test("an observer resuming with sinceRev gets the binding writes it missed, each at its own revision")
    func resumeReplaysBindingWrites() throws {
        let directory = try TemporaryDirectory("bindings-resume")
        let server = try KVODProcess(dataDirectory: directory.appending("data"))
        let client = try server.connect()
        try client.call("create", ["object": "a", "values": ["x": 1]])
        try client.call("create", ["object": "b", "values": ["y": 0]])
        try client.call("bind", ["from": Self.endpoint("a", "x"), "to": Self.endpoint("b", "y"), "convert": "$value * 10"])
        let since = try #require(try client.call("get", ["object": "b"])["rev"]?.intValue)
        try client.call("set", ["object": "a", "keyPath": "x", "value": 2])
        try client.call("set", ["object": "a", "keyPath": "x", "value": 3])
        let restarted = try server.restart(after: SIGTERM)
        let observer = try restarted.connect()
        try observer.call("observe", ["object": "b", "keyPath": "y", "options": ["old", "new"], "sinceRev": .int(since)])
        let events = try drainEvents(observer)
        expectEqual(events.map { $0["change"] ?? .null }, [["kind": 1, "old": 0, "new": 20], ["kind": 1, "old": 20, "new": 30]])
        expectEqual(events.map { $0["rev"] ?? .null }, [.int(since + 2), .int(since + 4)])
    }

    @Test("an observer of a computed property resuming with sinceRev gets the computed changes it missed")
    func resumeReplaysComputedChanges() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        try client.call("defineClass", ["class": json(Self.person)])
        try client.call("create", ["object": "p1", "class": "Person", "values": ["first": "Ada", "last": "Lovelace"]])
        let observer = try server.connect()
        let since = try #require(try observer.call("observe", ["object": "p1", "keyPath": "fullName", "options": ["old", "new"]])["rev"]?.intValue)
        observer.close()
        try client.call("set", ["object": "p1", "keyPath": "first", "value": "Augusta"])
        try client.call("set", ["object": "p1", "keyPath": "age", "value": 40])  // fullName unchanged: no event
        try client.call("set", ["object": "p1", "keyPath": "last", "value": "King"])
        let resumed = try server.connect()
        try resumed.call("observe", ["object": "p1", "keyPath": "fullName", "options": ["old", "new"], "sinceRev": .int(since)])
        let events = try drainEvents(resumed)
        expectEqual(events.map { $0["reason"] ?? .null }, ["valueChanged", "valueChanged"], "\(events)")
        #expect(events.map { $0["change"] ?? .null } == [
            ["kind": 1, "old": "Ada Lovelace", "new": "Augusta Lovelace"],
            ["kind": 1, "old": "Augusta Lovelace", "new": "Augusta King"],
        ], "\(events)")
        expectEqual(events.map { $0["rev"] ?? .null }, [.int(since + 1), .int(since + 3)])
    }
}
