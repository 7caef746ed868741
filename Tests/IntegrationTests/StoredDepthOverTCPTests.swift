import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Issue 10 item 1: one depth limit for stored values (`StoredDepth.maximum`, 128 levels counting the
/// object, the key path and the value), enforced on every write path with `too_large`, so that whatever
/// kvod acknowledges it can also store, reload after a restart and send to every client it ships.
@Suite("stored depth limit over TCP")
struct StoredDepthOverTCPTests {
    /// `levels` arrays nested in each other around `0` (`nestedArrays(2)` is `[[0]]`).
    static func nestedArrays(_ levels: Int) -> JSONValue {
        var value: JSONValue = 0
        for _ in 0..<levels { value = .array([value]) }
        return value
    }

    /// `{"k1":{"k2":...{"kN": leaf}}}`, and the key path `k1.k2...kN`.
    static func nestedObjects(_ keys: Int, leaf: JSONValue) -> (value: JSONValue, keyPath: String) {
        var value = leaf
        for index in stride(from: keys, through: 1, by: -1) { value = .object(["k\(index)": value]) }
        return (value, (1...max(keys, 1)).prefix(keys).map { "k\($0)" }.joined(separator: "."))
    }

    /// Asserts a `too_large` refusal that names the limit.
    static func expectTooDeep(_ reply: JSONValue, _ comment: String, sourceLocation: SourceLocation = #_sourceLocation) {
        expectError(reply, code: "too_large", comment, sourceLocation: sourceLocation)
        let message = reply["error"]?["message"]?.stringValue ?? ""
        #expect(message.contains("\(StoredDepth.maximum)"), "\(comment): \(message)", sourceLocation: sourceLocation)
        #expect(reply["error"]?["limit"] == .int(Int64(StoredDepth.maximum)), "\(comment): \(reply)",
                sourceLocation: sourceLocation)
    }

    @Test("the issue's reproductions are refused, change nothing and leave a store that restarts",
          arguments: [[], ["--history", "0"]])
    func issueReproductionsAreRefused(extra: [String]) throws {
        let directory = try TemporaryDirectory("depth-issue")
        let server = try KVODProcess(extra, dataDirectory: directory.appending("data"))
        let client = try server.connect()
        let observer = try server.connect()
        try client.call("create", ["object": "d"])
        let path = Self.nestedObjects(41, leaf: .object([:]))
        try client.call("set", ["object": "d", "keyPath": "p", "value": path.value])
        _ = try observer.call("observe", ["object": "d", "keyPath": "deep", "options": ["new"]])
        let revision = try currentRevision(client, object: "d")

        Self.expectTooDeep(try client.request("set", ["object": "d", "keyPath": "deep", "value": Self.nestedArrays(255)]),
                           "255 nested arrays")
        Self.expectTooDeep(try client.request("set", ["object": "d", "keyPath": .string("p." + path.keyPath + ".x"),
                                                      "value": Self.nestedArrays(250)]),
                           "a 250-deep array at the end of a 42-key path")
        expectEqual(try currentRevision(client, object: "d"), revision, "a refused write changed the revision")
        try expectNoEvents(observer, "a refused write notified")

        let before = try client.call("get", ["object": "d"])["value"]
        let restarted = try server.restart()
        let after = try restarted.connect().call("get", ["object": "d"])["value"]
        expectEqual(after, before)
        let cli = try KVOClientProcess.run(restarted, ["get", "d"])
        #expect(cli.status == 0 && cli.exitedNormally, "kvoclient get: \(cli.stderr)")
    }

    @Test("values exactly at the limit are accepted on every write path, readable by kvoclient and after a restart")
    func valuesAtTheLimitRoundTrip() throws {
        let limit = StoredDepth.maximum
        let directory = try TemporaryDirectory("depth-limit")
        let server = try KVODProcess(dataDirectory: directory.appending("data"))
        let client = try server.connect()

        // create: the object itself is the first level.
        try client.call("create", ["object": "whole", "values": ["v": Self.nestedArrays(limit - 1)]])
        Self.expectTooDeep(try client.request("create", ["object": "tooDeep", "values": ["v": Self.nestedArrays(limit)]]),
                           "create one level over")
        expectEqual(try client.request("get", ["object": "tooDeep"])["error"]?["code"], "not_found")

        // set at a key path of one key.
        try client.call("create", ["object": "d", "values": ["items": [1, 2], "link": ["$ref": "target"],
                                                            "a": ["b": ["c": [:]]]]])
        try client.call("create", ["object": "target", "values": ["inner": [:]]])
        try client.call("set", ["object": "d", "keyPath": "deep", "value": Self.nestedArrays(limit - 1)])
        Self.expectTooDeep(try client.request("set", ["object": "d", "keyPath": "deeper", "value": Self.nestedArrays(limit)]),
                           "set one level over")
        // set at a key path of four keys.
        try client.call("set", ["object": "d", "keyPath": "a.b.c.x", "value": Self.nestedArrays(limit - 4)])
        Self.expectTooDeep(try client.request("set", ["object": "d", "keyPath": "a.b.c.y", "value": Self.nestedArrays(limit - 3)]),
                           "set at a 4-key path one level over")
        // set through a reference: the depth counts inside the target (link.x lands at target.x, one key deep).
        try client.call("set", ["object": "d", "keyPath": "link.x", "value": Self.nestedArrays(limit - 1)])
        Self.expectTooDeep(try client.request("set", ["object": "d", "keyPath": "link.inner.y", "value": Self.nestedArrays(limit - 1)]),
                           "set through a reference one level over")
        // set of one array element, insert and replace: the array is one more level.
        try client.call("set", ["object": "d", "keyPath": "items.0", "value": Self.nestedArrays(limit - 2)])
        Self.expectTooDeep(try client.request("set", ["object": "d", "keyPath": "items.1", "value": Self.nestedArrays(limit - 1)]),
                           "set of an element one level over")
        try client.call("insert", ["object": "d", "keyPath": "items", "values": [Self.nestedArrays(limit - 2), 3]])
        Self.expectTooDeep(try client.request("insert", ["object": "d", "keyPath": "items",
                                                         "values": [4, Self.nestedArrays(limit - 1)]]),
                           "insert one level over")
        try client.call("replace", ["object": "d", "keyPath": "items", "index": 1, "value": Self.nestedArrays(limit - 2)])
        Self.expectTooDeep(try client.request("replace", ["object": "d", "keyPath": "items", "indexes": [0, 1],
                                                          "values": [1, Self.nestedArrays(limit - 1)]]),
                           "replace one level over")

        // A binding's write obeys the same rule: its target sits two keys deep, so a value that fits at
        // the source's one key is refused there, and the target keeps its value.
        try client.call("create", ["object": "source", "values": ["v": 0]])
        try client.call("create", ["object": "sink", "values": ["box": ["w": "unchanged"]]])
        try client.call("bind", ["from": ["object": "source", "keyPath": "v"], "to": ["object": "sink", "keyPath": "box.w"]])
        try client.call("set", ["object": "source", "keyPath": "v", "value": Self.nestedArrays(limit - 1)])
        expectEqual(try client.call("get", ["object": "sink", "keyPath": "box.w"])["value"], "unchanged")
        try client.call("set", ["object": "source", "keyPath": "v", "value": Self.nestedArrays(limit - 2)])
        expectEqual(try client.call("get", ["object": "sink", "keyPath": "box.w"])["value"], Self.nestedArrays(limit - 2))

        // Class definitions: stored and listed like objects, so they obey the limit too, and a default
        // that fits in the definition always fits in an object.
        let fitting = try json(#"{"name":"Deep","properties":{"p":{"type":"array","default":\#(Self.nestedArrays(limit - 3))}}}"#)
        try client.call("defineClass", ["class": fitting])
        try client.call("create", ["object": "classy", "class": "Deep"])
        let tooDeep = try json(#"{"name":"Deeper","properties":{"p":{"type":"array","default":\#(Self.nestedArrays(limit - 2))}}}"#)
        Self.expectTooDeep(try client.request("defineClass", ["class": tooDeep]), "a class definition one level over")

        let objects = try client.call("list")["objects"]?.arrayValue ?? []
        var before: [String: JSONValue] = [:]
        for id in objects {
            let id = try #require(id.stringValue)
            before[id] = try client.call("get", ["object": .string(id)])["value"]
            let cli = try KVOClientProcess.run(server, ["get", id])
            #expect(cli.status == 0 && cli.exitedNormally, "kvoclient get \(id): \(cli.stderr)")
            expectEqual((try? JSONParser.parse(Array(cli.stdout.utf8))), before[id], "kvoclient get \(id)")
        }
        expectEqual(before["d"]?["deep"], Self.nestedArrays(limit - 1))
        let classes = try client.call("classes")["classes"]

        let restarted = try server.restart()
        let reconnected = try restarted.connect()
        for (id, value) in before {
            expectEqual(try reconnected.call("get", ["object": .string(id)])["value"], value, "\(id) after the restart")
        }
        expectEqual(try reconnected.call("classes")["classes"], classes)
    }
}
