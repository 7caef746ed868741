import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// References, array operations and collection operators through the real kvod over TCP.
@Suite struct CollectionsOverTCPTests {
    private func errorCode(_ reply: JSONValue) -> String? {
        reply["error"]?["code"]?.stringValue
    }

    @Test func insertRemoveReplaceWithEveryOptionCombination() throws {
        let server = try KVODProcess()
        let writer = try server.connect()
        try writer.call("create", ["object": "list", "values": ["items": ["a", "b"]]])
        let names = ["new", "old", "initial", "prior"]
        for mask in 0..<16 {
            let options = names.enumerated().filter { mask & (1 << $0.offset) != 0 }.map(\.element)
            let observer = try server.connect()
            let current = try writer.call("get", ["object": "list", "keyPath": "items"])["value"]!
            let sub = try observer.call("observe", ["object": "list", "keyPath": "items",
                                                    "options": .array(options.map(JSONValue.string))])["sub"]!
            if options.contains("initial") {
                let initial = try #require(try observer.nextEvent(timeout: 5))
                expectEqual(initial["change"], (options.contains("new") ? ["kind": 1, "new": current] : ["kind": 1]))
            }
            let count = Int64(current.arrayValue!.count)
            // (request, kind, indexes, old elements, new elements)
            let steps: [(String, [String: JSONValue], Int64, [JSONValue], JSONValue?, JSONValue?)] = [
                ("insert", ["index": 0, "values": ["x", "y"]], 2, [0, 1], nil, ["x", "y"]),
                ("replace", ["indexes": [1], "values": ["Y"]], 4, [1], ["y"], ["Y"]),
                ("remove", ["indexes": [0, .int(count + 1)]], 3, [0, .int(count + 1)], .array(["x", current.arrayValue!.last!]), nil),
            ]
            for (op, params, kind, indexes, old, new) in steps {
                var request = params
                request["object"] = "list"
                request["keyPath"] = "items"
                let rev = try writer.call(op, request)["rev"]!
                if options.contains("prior") {
                    let prior = try #require(try observer.nextEvent(timeout: 5))
                    var expected: [String: JSONValue] = ["kind": .int(kind), "indexes": .array(indexes), "notificationIsPrior": true]
                    if options.contains("old"), let old { expected["old"] = old }
                    expectEqual(prior["change"], .object(expected), "\(op) prior with \(options)")
                    expectEqual(prior["rev"], rev)
                }
                let event = try #require(try observer.nextEvent(timeout: 5))
                var expected: [String: JSONValue] = ["kind": .int(kind), "indexes": .array(indexes)]
                if options.contains("old"), let old { expected["old"] = old }
                if options.contains("new"), let new { expected["new"] = new }
                expectEqual(event["change"], .object(expected), "\(op) with \(options)")
                #expect(event["sub"] == sub && event["reason"] == "valueChanged" && event["rev"] == rev)
            }
            try observer.call("ping")
            #expect(observer.pendingEvents.isEmpty)
            observer.close()
        }
    }

    @Test func arrayErrorsChangeNothing() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        try client.call("create", ["object": "o", "values": ["items": [1, 2], "name": "n"]])
        let bad: [(String, [String: JSONValue], String)] = [
            ("insert", ["keyPath": "items", "index": 5, "value": 1], "out_of_range"),
            ("remove", ["keyPath": "items", "indexes": [0, 9]], "out_of_range"),
            ("replace", ["keyPath": "items", "index": 2, "value": 1], "out_of_range"),
            ("remove", ["keyPath": "name", "index": 0], "type_mismatch"),
            ("insert", ["keyPath": "nothing", "value": 1], "not_found"),
            ("insert", ["keyPath": "items"], "bad_request"),
            ("remove", ["keyPath": "items"], "bad_request"),
            ("remove", ["keyPath": "items", "index": -1], "bad_request"),
            ("replace", ["keyPath": "items", "indexes": [0], "value": 1], "bad_request"),
            ("insert", ["keyPath": "items", "indexes": [0, 1], "values": [1]], "bad_request"),
            ("set", ["keyPath": "items.@count", "value": 1], "bad_request"),
            ("set", ["keyPath": "items.7", "value": 1], "out_of_range"),
        ]
        for (op, params, code) in bad {
            var request = params
            request["object"] = "o"
            expectEqual(errorCode(try client.request(op, request)), code, "\(op) \(params)")
        }
        expectEqual(try client.call("get", ["object": "o"])["value"], ["items": [1, 2], "name": "n"])
        expectEqual(try client.call("get", ["object": "o"])["rev"], 1)
    }

    @Test func referencesRebindAcrossTheWire() throws {
        let server = try KVODProcess()
        let writer = try server.connect()
        let observer = try server.connect()
        try writer.call("create", ["object": "addr1", "values": ["city": "Oslo"]])
        try writer.call("create", ["object": "person", "values": ["address": ["$ref": "addr1"]]])
        try observer.call("observe", ["object": "person", "keyPath": "address.city", "options": ["new", "old"]])
        expectEqual(try writer.call("get", ["object": "person", "keyPath": "address.city"])["value"], "Oslo")

        try writer.call("set", ["object": "addr1", "keyPath": "city", "value": "Bergen"])
        var event = try #require(try observer.nextEvent(timeout: 5))
        #expect(event["reason"] == "valueChanged" && event["change"] == ["kind": 1, "old": "Oslo", "new": "Bergen"])

        try writer.call("delete", ["object": "addr1"])
        event = try #require(try observer.nextEvent(timeout: 5))
        #expect(event["reason"] == "pathChanged" && event["change"] == ["kind": 1, "old": "Bergen", "new": .null])

        try writer.call("create", ["object": "addr2", "values": ["city": "Paris"]])
        try writer.call("set", ["object": "person", "keyPath": "address", "value": ["$ref": "addr2"]])
        event = try #require(try observer.nextEvent(timeout: 5))
        #expect(event["reason"] == "pathChanged" && event["change"] == ["kind": 1, "old": .null, "new": "Paris"])

        try writer.call("create", ["object": "addr1", "values": ["city": "Oslo again"]])
        try writer.call("set", ["object": "person", "keyPath": "address.city", "value": "Lyon"])
        event = try #require(try observer.nextEvent(timeout: 5))
        expectEqual(event["change"], ["kind": 1, "old": "Paris", "new": "Lyon"], "the re-created addr1 is not observed")
        expectEqual(try writer.call("get", ["object": "addr2", "keyPath": "city"])["value"], "Lyon")
    }

    @Test func operatorsAreReadableAndObservable() throws {
        let server = try KVODProcess()
        let writer = try server.connect()
        let observer = try server.connect()
        try writer.call("create", ["object": "cart", "values": ["items": [["price": 2], ["price": 3]]]])
        expectEqual(try writer.call("get", ["object": "cart", "keyPath": "items.@sum.price"])["value"], 5)
        expectEqual(try writer.call("get", ["object": "cart", "keyPath": "items.price"])["value"], [2, 3])
        let sum = try observer.call("observe", ["object": "cart", "keyPath": "items.@sum.price", "options": ["new", "old"]])["sub"]!
        let count = try observer.call("observe", ["object": "cart", "keyPath": "items.@count", "options": ["new"]])["sub"]!
        try writer.call("insert", ["object": "cart", "keyPath": "items", "value": ["price": 0]])
        var event = try #require(try observer.nextEvent(timeout: 5))
        #expect(event["sub"] == count && event["change"] == ["kind": 1, "new": 3])
        try writer.call("set", ["object": "cart", "keyPath": "items.0.price", "value": 10])
        event = try #require(try observer.nextEvent(timeout: 5))
        #expect(event["sub"] == sum && event["change"] == ["kind": 1, "old": 5, "new": 13])
        try observer.call("ping")
        #expect(observer.pendingEvents.isEmpty)
    }
}
