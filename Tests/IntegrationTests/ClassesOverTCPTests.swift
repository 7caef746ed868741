import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Classes through the real kvod over TCP: `defineClass` and `classes`, `create` with a class (defaults,
/// `$class`), and every validation rule refusing a write with the right `property` and `rule` while
/// changing nothing (same value, same revision, no event to an observer), with the values at each
/// boundary accepted.
@Suite struct ClassesOverTCPTests {
    /// A class with no rules but `required`, the target of `Item.owner`.
    static let person = #"{"name":"Person","properties":{"name":{"type":"string","required":true}}}"#
    /// One property per rule.
    static let item = #"""
        {"name":"Item","properties":{
          "name":{"type":"string","required":true,"minLength":2,"maxLength":5,"pattern":"^[a-z]+$"},
          "qty":{"type":"integer","min":0,"max":10,"default":1},
          "price":{"type":"number","min":0.5,"max":99.5},
          "size":{"type":"string","enum":["S","M","L"],"default":"M"},
          "active":{"type":"bool","default":true},
          "tags":{"type":"array","items":{"type":"string","maxLength":3},"minLength":1,"maxLength":3,"default":["a"]},
          "meta":{"type":"object"},
          "owner":{"type":"ref","class":"Person"}
        }}
        """#

    /// A server with Person and Item defined, objects `p1` (Person), `plain` (no class) and `i1` (Item),
    /// and an observer connection watching every property of `i1`.
    private struct Fixture {
        let server: KVODProcess
        let client: KVOConnection
        let observer: KVOConnection
        static let observed = ["name", "qty", "price", "size", "active", "tags", "meta", "owner", "extra", "$class"]

        init() throws {
            server = try KVODProcess()
            client = try server.connect()
            observer = try server.connect()
            expectEqual(try client.call("defineClass", ["class": json(ClassesOverTCPTests.person)])["name"], "Person")
            expectEqual(try client.call("defineClass", ["class": json(ClassesOverTCPTests.item)])["name"], "Item")
            try client.call("create", ["object": "p1", "class": "Person", "values": ["name": "Ada"]])
            try client.call("create", ["object": "plain", "values": ["name": "Bob"]])
            try client.call("create", ["object": "i1", "class": "Item", "values": [
                "name": "abc", "qty": 3, "price": 2.5, "tags": ["x", "y"], "owner": ["$ref": "p1"],
            ]])
            try client.call("create", ["object": "order", "values": ["item": ["$ref": "i1"]]])
            for keyPath in Self.observed {
                try observer.call("observe", ["object": "i1", "keyPath": .string(keyPath), "options": ["new", "old"]])
            }
        }
    }

    @Test("defineClass replies with the name, does not move rev, refuses a redefinition; classes lists canonical definitions by name")
    func defineAndList() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        try client.call("create", ["object": "x"])
        let reply = try client.request("defineClass", ["class": json(Self.person)])
        expectEqual(reply, ["id": reply["id"]!, "ok": true, "name": "Person"])
        expectEqual(try client.call("defineClass", ["class": json(Self.item)])["name"], "Item")
        expectEqual(try currentRevision(client, object: "x"), 1, "defineClass does not advance rev")
        expectError(try client.request("defineClass", ["class": json(Self.person)]), code: "exists")

        let classes = try #require(try client.call("classes")["classes"]?.arrayValue)
        expectEqual(classes.map { $0["name"] }, ["Item", "Person"])
        expectEqual(classes[1]["properties"]?["name"], ["type": "string", "required": true])
        let item = try json(Self.item)
        expectEqual(classes[0]["properties"]?["qty"], item["properties"]?["qty"])
        expectEqual(classes[0]["properties"]?["tags"], item["properties"]?["tags"])
        expectEqual(classes[0]["properties"]?["owner"], item["properties"]?["owner"])
        expectEqual(classes[0]["properties"]?["name"], item["properties"]?["name"])
        // Unknown types, min above max and a default breaking the rules are refused; nothing is added.
        expectError(try client.request("defineClass", ["class": json(
            #"{"name":"Bad","properties":{"o":{"type":"date"}}}"#)]), code: "bad_request")
        expectError(try client.request("defineClass", ["class": json(
            #"{"name":"Bad","properties":{"n":{"type":"number","min":5,"max":1}}}"#)]), code: "bad_request")
        expectError(try client.request("defineClass", ["class": json(
            #"{"name":"Bad","properties":{"n":{"type":"number","max":1,"default":2}}}"#)]), code: "bad_request")
        expectEqual(try client.call("classes")["classes"]?.arrayValue?.count, 2)
    }

    @Test("create with a class fills defaults and stores $class; unknown class and $class in values are refused")
    func createWithClass() throws {
        let fixture = try Fixture()
        let client = fixture.client
        let rev = try client.call("create", ["object": "i2", "class": "Item", "values": ["name": "xy"]])["rev"]
        #expect(try client.call("get", ["object": "i2"])["value"] == [
            "$class": "Item", "name": "xy", "qty": 1, "size": "M", "active": true, "tags": ["a"],
        ])
        expectEqual(try client.call("get", ["object": "i2", "keyPath": "$class"])["value"], "Item")
        #expect(try client.call("get", ["object": "i1"])["value"] == [
            "$class": "Item", "name": "abc", "qty": 3, "price": 2.5, "size": "M", "active": true,
            "tags": ["x", "y"], "owner": ["$ref": "p1"],
        ])
        // Given values win over defaults.
        try client.call("create", ["object": "i3", "class": "Item", "values": ["name": "zz", "qty": 0, "tags": ["q"]]])
        expectEqual(try client.call("get", ["object": "i3", "keyPath": "qty"])["value"], 0)
        expectEqual(try client.call("get", ["object": "i3", "keyPath": "tags"])["value"], ["q"])

        let before = try currentRevision(client, object: "i2")
        expectEqual(before, .int((rev?.intValue ?? 0) + 1))
        expectError(try client.request("create", ["object": "n1", "class": "Nope", "values": ["name": "ab"]]), code: "not_found")
        expectError(try client.request("create", ["object": "n2", "class": "Item", "values": ["name": "ab", "$class": "Item"]]),
                    code: "bad_request")
        expectError(try client.request("create", ["object": "n3", "values": ["$class": "Item"]]), code: "bad_request")
        expectError(try client.request("create", ["object": "n4", "class": "Item", "values": [:]]),
                    code: "invalid_value", property: "name", rule: "required")
        expectError(try client.request("create", ["object": "n5", "class": "Item", "values": ["name": "ab", "bogus": 1]]),
                    code: "invalid_value", property: "bogus", rule: "undefined")
        expectError(try client.request("create", ["object": "n6", "class": "Item", "values": ["name": "ab", "qty": 11]]),
                    code: "invalid_value", property: "qty", rule: "max")
        expectError(try client.request("create", ["object": "n7", "class": "Item", "values": ["name": "ab", "owner": ["$ref": "plain"]]]),
                    code: "invalid_value", property: "owner", rule: "class")
        expectEqual(try client.call("list")["objects"], ["i1", "i2", "i3", "order", "p1", "plain"])
        expectEqual(try currentRevision(client, object: "i2"), before)
        try expectNoEvents(fixture.observer)
    }

    /// (op, params without "object", property, rule) for writes to `i1` (or, with an "object" param,
    /// elsewhere) that its class refuses.
    static let refusals: [(String, [String: JSONValue], String, String)] = [
        ("set", ["keyPath": "name", "value": 5], "name", "type"),
        ("set", ["keyPath": "name", "value": .null], "name", "required"),
        ("set", ["keyPath": "name", "value": "a"], "name", "minLength"),
        ("set", ["keyPath": "name", "value": "abcdef"], "name", "maxLength"),
        ("set", ["keyPath": "name", "value": "ab1"], "name", "pattern"),
        ("set", ["keyPath": "qty", "value": 11], "qty", "max"),
        ("set", ["keyPath": "qty", "value": -1], "qty", "min"),
        ("set", ["keyPath": "qty", "value": 1.5], "qty", "type"),
        ("set", ["keyPath": "qty", "value": "3"], "qty", "type"),
        ("set", ["keyPath": "price", "value": 0.4], "price", "min"),
        ("set", ["keyPath": "price", "value": 99.6], "price", "max"),
        ("set", ["keyPath": "size", "value": "XL"], "size", "enum"),
        ("set", ["keyPath": "active", "value": "yes"], "active", "type"),
        ("set", ["keyPath": "tags", "value": "x"], "tags", "type"),
        ("set", ["keyPath": "tags", "value": []], "tags", "minLength"),
        ("set", ["keyPath": "tags", "value": ["a", "b", "c", "d"]], "tags", "maxLength"),
        ("set", ["keyPath": "tags", "value": ["toolong"]], "tags", "maxLength"),
        ("set", ["keyPath": "tags", "value": [1]], "tags", "type"),
        ("set", ["keyPath": "tags.0", "value": "long"], "tags", "maxLength"),
        ("set", ["keyPath": "tags.1", "value": 7], "tags", "type"),
        ("set", ["keyPath": "meta", "value": ["$ref": "p1"]], "meta", "type"),
        ("set", ["keyPath": "meta", "value": [1]], "meta", "type"),
        ("set", ["keyPath": "owner", "value": ["$ref": "plain"]], "owner", "class"),
        ("set", ["keyPath": "owner", "value": ["$ref": "missing"]], "owner", "class"),
        ("set", ["keyPath": "owner", "value": ["$ref": "i1"]], "owner", "class"),
        ("set", ["keyPath": "owner", "value": "p1"], "owner", "type"),
        ("set", ["keyPath": "extra", "value": 1], "extra", "undefined"),
        ("insert", ["keyPath": "tags", "value": "long"], "tags", "maxLength"),
        ("insert", ["keyPath": "tags", "value": 5, "index": 0], "tags", "type"),
        ("insert", ["keyPath": "tags", "values": ["b", "c"]], "tags", "maxLength"),
        ("remove", ["keyPath": "tags", "indexes": [0, 1]], "tags", "minLength"),
        ("replace", ["keyPath": "tags", "index": 0, "value": "long"], "tags", "maxLength"),
        ("replace", ["keyPath": "tags", "indexes": [0, 1], "values": ["ok", 5]], "tags", "type"),
        // Through a reference from an object without a class, into i1.
        ("set", ["object": "order", "keyPath": "item.qty", "value": 50], "qty", "max"),
        ("set", ["object": "order", "keyPath": "item.extra", "value": 1], "extra", "undefined"),
        ("insert", ["object": "order", "keyPath": "item.tags", "value": "long"], "tags", "maxLength"),
    ]

    @Test("each rule refuses with invalid_value, its property and rule; nothing changes, rev stays, no event")
    func everyRuleRefuses() throws {
        let fixture = try Fixture()
        let client = fixture.client
        let before = try client.call("get", ["object": "i1"])
        let stored = try #require(before["value"])
        for (op, params, property, rule) in Self.refusals {
            var request = params
            if request["object"] == nil { request["object"] = "i1" }
            expectError(try client.request(op, request), code: "invalid_value", property: property, rule: rule, "\(op) \(params)")
            let after = try client.call("get", ["object": "i1"])
            expectEqual(after["value"], stored, "\(op) \(params) changed i1")
            expectEqual(after["rev"], before["rev"], "\(op) \(params) advanced rev")
        }
        try expectNoEvents(fixture.observer)
    }

    @Test("set of $class is read_only and changes nothing; set on an object without a class is free")
    func classKeyIsReadOnly() throws {
        let fixture = try Fixture()
        let client = fixture.client
        let rev = try currentRevision(client, object: "i1")
        expectError(try client.request("set", ["object": "i1", "keyPath": "$class", "value": "Person"]),
                    code: "read_only", property: "$class")
        expectError(try client.request("set", ["object": "order", "keyPath": "item.$class", "value": "Person"]),
                    code: "read_only", property: "$class")
        expectEqual(try client.call("get", ["object": "i1", "keyPath": "$class"])["value"], "Item")
        expectEqual(try currentRevision(client, object: "i1"), rev)
        try expectNoEvents(fixture.observer)
        try client.call("set", ["object": "plain", "keyPath": "anything", "value": ["$ref": "nowhere"]])
    }

    @Test("values at each boundary are accepted, stored and observed")
    func boundariesAreAccepted() throws {
        let fixture = try Fixture()
        let client = fixture.client
        let accepted: [(String, [String: JSONValue], String, JSONValue)] = [
            ("set", ["keyPath": "name", "value": "ab"], "name", "ab"),
            ("set", ["keyPath": "name", "value": "abcde"], "name", "abcde"),
            ("set", ["keyPath": "qty", "value": 0], "qty", 0),
            ("set", ["keyPath": "qty", "value": 10], "qty", 10),
            ("set", ["keyPath": "qty", "value": 7.0], "qty", 7),
            ("set", ["keyPath": "price", "value": 0.5], "price", 0.5),
            ("set", ["keyPath": "price", "value": 99.5], "price", 99.5),
            ("set", ["keyPath": "price", "value": 3], "price", 3),
            ("set", ["keyPath": "price", "value": .null], "price", .null),
            ("set", ["keyPath": "size", "value": "L"], "size", "L"),
            ("set", ["keyPath": "active", "value": false], "active", false),
            ("set", ["keyPath": "tags", "value": ["abc", "b", "c"]], "tags", ["abc", "b", "c"]),
            ("remove", ["keyPath": "tags", "indexes": [1, 2]], "tags", ["abc"]),
            ("insert", ["keyPath": "tags", "values": ["d", "eee"]], "tags", ["abc", "d", "eee"]),
            ("replace", ["keyPath": "tags", "index": 2, "value": "fff"], "tags", ["abc", "d", "fff"]),
            ("set", ["keyPath": "tags.0", "value": "zzz"], "tags", ["zzz", "d", "fff"]),
            ("set", ["keyPath": "meta", "value": ["a": 1]], "meta", ["a": 1]),
            ("set", ["keyPath": "meta.b", "value": "anything"], "meta", ["a": 1, "b": "anything"]),
            ("set", ["keyPath": "owner", "value": .null], "owner", .null),
            ("set", ["keyPath": "owner", "value": ["$ref": "p1"]], "owner", ["$ref": "p1"]),
            ("set", ["object": "order", "keyPath": "item.qty", "value": 9], "qty", 9),
        ]
        var rev = try #require(try currentRevision(client, object: "i1")?.intValue)
        for (op, params, property, expected) in accepted {
            var request = params
            if request["object"] == nil { request["object"] = "i1" }
            let reply = try client.request(op, request)
            expectEqual(reply["ok"], true, "\(op) \(params): \(reply)")
            rev += 1
            expectEqual(reply["rev"], .int(rev), "\(op) \(params)")
            expectEqual(try client.call("get", ["object": "i1", "keyPath": .string(property)])["value"], expected, "\(op) \(params)")
        }
        let events = try drainEvents(fixture.observer)
        // Every accepted write that changed a value was observed: 21 writes, each changing its property.
        expectEqual(events.count, accepted.count, "\(events.map(\.description))")
        #expect(events.allSatisfy { $0["object"] == "i1" })
        expectEqual(events.map { $0["keyPath"]?.stringValue ?? "" }, accepted.map { $0.2 })
    }

    @Test("a reference checks its target's class at the time of the write; a ref to an object of a class is followed")
    func referenceToClass() throws {
        let fixture = try Fixture()
        let client = fixture.client
        expectEqual(try client.call("get", ["object": "i1", "keyPath": "owner.name"])["value"], "Ada")
        try client.call("create", ["object": "p2", "class": "Person", "values": ["name": "Eve"]])
        try client.call("set", ["object": "i1", "keyPath": "owner", "value": ["$ref": "p2"]])
        expectEqual(try client.call("get", ["object": "i1", "keyPath": "owner.name"])["value"], "Eve")
        // Writing through the reference is validated by Person's rules.
        expectError(try client.request("set", ["object": "i1", "keyPath": "owner.name", "value": 1]),
                    code: "invalid_value", property: "name", rule: "type")
        expectError(try client.request("set", ["object": "i1", "keyPath": "owner.age", "value": 1]),
                    code: "invalid_value", property: "age", rule: "undefined")
        expectEqual(try client.call("get", ["object": "p2"])["value"], ["$class": "Person", "name": "Eve"])
    }
}
