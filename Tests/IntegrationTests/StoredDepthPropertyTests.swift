import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Issue 10 item 1, as a property: seeded random writes of values whose depth lands just under, at or
/// just over the room left at a random key path (directly, through a reference, into an array element,
/// by insert) are acknowledged exactly when the object stays within `StoredDepth.maximum`; after a
/// restart every object is what the acknowledged writes made it.
@Suite("stored depth property over TCP")
struct StoredDepthPropertyTests {
    /// A value exactly `depth` levels deep, mixing arrays and objects with scalars beside the deep branch.
    static func value(depth: Int, _ random: inout SplitMix64) -> JSONValue {
        guard depth > 0 else { return .int(Int64.random(in: -5...5, using: &random)) }
        let inner = value(depth: depth - 1, &random)
        if Bool.random(using: &random) { return .array(Bool.random(using: &random) ? [inner, "s"] : [inner]) }
        return .object(["deep": inner, "flat": .bool(Bool.random(using: &random))])
    }

    /// `root` with `new` stored at `path` (object keys and array indexes; the last key created in an object).
    static func setting(_ new: JSONValue, at path: ArraySlice<String>, in root: JSONValue) -> JSONValue {
        guard let key = path.first else { return new }
        switch root {
        case var .object(members):
            members[key] = setting(new, at: path.dropFirst(), in: members[key] ?? .null)
            return .object(members)
        case var .array(elements):
            let index = Int(key)!
            elements[index] = setting(new, at: path.dropFirst(), in: elements[index])
            return .array(elements)
        default:
            preconditionFailure("the test's path goes through a scalar")
        }
    }

    /// The spine `{"n":{"n":...{}}}` of `levels` objects under key `n`, and its key paths by length.
    static func spine(_ levels: Int) -> JSONValue {
        var value = JSONValue.object([:])
        for _ in 0..<levels { value = .object(["n": value]) }
        return value
    }

    @Test("random writes near the depth limit are acknowledged exactly when they fit and survive a restart",
          arguments: [UInt64(1), 2, 3])
    func randomWritesNearTheLimit(seed: UInt64) throws {
        let limit = StoredDepth.maximum
        var random = SplitMix64(state: seed)
        let directory = try TemporaryDirectory("depth-property")
        let server = try KVODProcess(dataDirectory: directory.appending("data"))
        let client = try server.connect()
        // "home" holds a spine of nested objects 60 deep and an array; "via" refers to "home".
        var model: [String: JSONValue] = [
            "home": .object(["s": Self.spine(60), "list": [0, 1, 2]]),
            "via": .object(["link": ["$ref": "home"], "own": [:]]),
        ]
        for (id, value) in model { try client.call("create", ["object": .string(id), "values": value]) }

        var accepted = 0, refused = 0
        for step in 0..<150 {
            // Where the write lands inside "home" (the path inside the stored object), and how it is sent.
            let spineKeys = Int.random(in: 0...60, using: &random)
            let storedPath = ["s"] + Array(repeating: "n", count: spineKeys) + ["v\(step % 7)"]
            enum Route: CaseIterable { case direct, reference, element, insert }
            let route = Route.allCases.randomElement(using: &random)!
            var levels = storedPath.count
            var request: [String: JSONValue]
            var elementPath: [String] = []
            switch route {
            case .direct, .reference:
                let keyPath = (route == .reference ? ["link"] : []) + storedPath
                request = ["object": route == .reference ? "via" : "home", "keyPath": .string(keyPath.joined(separator: "."))]
            case .element:
                let index = Int.random(in: 0..<(model["home"]!["list"]!.arrayValue!.count), using: &random)
                elementPath = ["list", String(index)]
                levels = 2
                request = ["object": "home", "keyPath": .string(elementPath.joined(separator: "."))]
            case .insert:
                levels = 2
                request = ["object": "home", "keyPath": "list"]
            }
            let depth = max(0, limit - levels + Int.random(in: -2...2, using: &random))
            let value = Self.value(depth: depth, &random)
            let reply: JSONValue
            if route == .insert {
                request["values"] = [value]
                reply = try client.request("insert", request)
            } else {
                request["value"] = value
                reply = try client.request("set", request)
            }
            let fits = levels + depth <= limit
            expectEqual(reply["ok"], .bool(fits), "step \(step) (\(route), \(levels) levels + \(depth)): \(reply)")
            guard reply["ok"] == true else {
                expectEqual(reply["error"]?["code"], "too_large", "step \(step): \(reply)")
                refused += 1
                continue
            }
            accepted += 1
            switch route {
            case .direct, .reference: model["home"] = Self.setting(value, at: storedPath[...], in: model["home"]!)
            case .element: model["home"] = Self.setting(value, at: elementPath[...], in: model["home"]!)
            case .insert:
                var list = model["home"]!["list"]!.arrayValue!
                list.append(value)
                model["home"] = Self.setting(.array(list), at: ["list"], in: model["home"]!)
            }
        }
        #expect(accepted > 20 && refused > 20, "accepted \(accepted), refused \(refused)")
        for (id, value) in model {
            expectEqual(try client.call("get", ["object": .string(id)])["value"], value, "\(id) before the restart")
        }
        let restarted = try server.restart()
        let reconnected = try restarted.connect()
        for (id, value) in model {
            expectEqual(try reconnected.call("get", ["object": .string(id)])["value"], value, "\(id) after the restart")
            let cli = try KVOClientProcess.run(restarted, ["get", id])
            #expect(cli.status == 0 && (try? JSONParser.parse(Array(cli.stdout.utf8))) == value, "kvoclient get \(id)")
        }
    }
}
