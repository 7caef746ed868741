import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// The read rule as non-interference, over two real kvods (issue 24): both get the same users, the same
/// readable objects and the same random operations from alice and bob (get, observe of objects and
/// patterns with every option, live queries whose filters read through references, resumes, sets, array
/// changes, creates with classes whose `ref` rules and computed properties read through references, bindings, info, list), but their unreadable objects
/// (`secret-*`) differ: other values, types, lengths, keys, classes, or no object at all, changed by root
/// between steps in each world's own way. Whatever alice and bob receive (every reply and event, byte for
/// byte) must be the same in both worlds: anything that differs is something of an unreadable object that
/// reached them. Root, who may read everything, must see the worlds differ (or the test proves nothing).
///
/// Runs a fixed seed in CI; `KVOD_READ_RULE_STEPS` (default 600) and `KVOD_READ_RULE_SEED` run longer or
/// other graphs.
@Suite struct ReadRuleNoninterferenceTests {
    static let readable = ["pub-1", "pub-2", "pub-3", "pub-s", "pub-c", "alice-1", "alice-2", "alice-s", "alice-c"]
    static let secrets = ["secret-1", "secret-2", "secret-3"]
    static let targets = readable + secrets + ["missing-1", "alice-9", "pub-9"]
    static let keys = ["name", "r", "tags", "deep", "items", "n"]
    static let pathKeys = ["name", "name", "r", "r", "deep", "tags", "0", "1", "zz", "c", "@count", "@sum", "@unionOfObjects"]
    static let words: [JSONValue] = ["a", "bb", "ccc", "", "SECRETWORD", 0, 1, 2.5, -7, true, false, .null]

    /// One kvod and the three users' connections, with what alice and bob have received.
    final class World {
        let server: KVODProcess
        let scratch: TemporaryDirectory
        let root, alice, bob: KVOConnection
        /// This world's own choices for its unreadable objects.
        var random: SplitMix64
        var transcripts: [String: [String]] = ["alice": [], "bob": [], "root": []]

        init(seed: UInt64) throws {
            (server, scratch) = try ReadRuleOverTCPTests.server()
            root = try ReadRuleOverTCPTests.login(server, "root")
            alice = try ReadRuleOverTCPTests.login(server, "alice")
            bob = try ReadRuleOverTCPTests.login(server, "bob")
            random = SplitMix64(state: seed)
        }

        func connection(_ user: String) -> KVOConnection {
            user == "alice" ? alice : user == "bob" ? bob : root
        }

        /// Sends a request as `user` and records every line up to its reply.
        func run(_ user: String, _ op: String, _ params: [String: JSONValue]) throws {
            let connection = self.connection(user)
            let reply = try connection.request(op, params)
            transcripts[user, default: []].append(contentsOf: connection.pendingEvents.map(\.description))
            while try connection.nextEvent(timeout: 0) != nil {}
            transcripts[user, default: []].append(reply.description)
        }

        /// Flushes every user's events (a ping each: events of earlier writes arrive before its reply).
        func flush() throws {
            for user in ["alice", "bob", "root"] { try run(user, "ping", [:]) }
        }

        /// One write by root to an unreadable object, chosen by this world alone, that takes exactly one
        /// revision in every world (so revisions, which readers see, stay in step).
        func changeSecrets() throws {
            let id = ReadRuleNoninterferenceTests.secrets[random.below(3)]
            let exists = try root.request("get", ["object": .string(id)])["ok"] == true
            let reply: JSONValue
            if !exists {
                let (className, members) = ReadRuleNoninterferenceTests.secretValue(&random)
                var params: [String: JSONValue] = ["object": .string(id), "values": .object(members)]
                if let className { params["class"] = .string(className) }
                reply = try root.request("create", params)
            } else if random.below(4) == 0 {
                reply = try root.request("delete", ["object": .string(id)])
            } else {
                let isClassed = try root.request("get", ["object": .string(id), "keyPath": "$class"])["value"] != .null
                let key = isClassed ? "name" : ReadRuleNoninterferenceTests.keys[random.below(6)]
                let value = isClassed ? JSONValue.string(String(repeating: "s", count: random.below(9)))
                    : ReadRuleNoninterferenceTests.value(&random, depth: 2)
                reply = try root.request("set", ["object": .string(id), "keyPath": .string(key), "value": value])
            }
            guard reply["ok"] == true else { throw KVODUserToolError.failed("a write to an unreadable object failed: \(reply)") }
        }
    }

    static func value(_ random: inout SplitMix64, depth: Int) -> JSONValue {
        switch random.below(depth > 0 ? 8 : 5) {
        case 0, 1: return words[random.below(words.count)]
        case 2: return .int(Int64(random.below(5)))
        case 3, 4: return ["$ref": .string(targets[random.below(targets.count)])]
        case 5: return .array((0..<random.below(4)).map { _ in value(&random, depth: depth - 1) })
        default:
            var members: [String: JSONValue] = [:]
            for _ in 0..<(1 + random.below(3)) { members[keys[random.below(keys.count)]] = value(&random, depth: depth - 1) }
            return .object(members)
        }
    }

    /// An unreadable object's value: of class S (a `name`), or free-form with any keys.
    static func secretValue(_ random: inout SplitMix64) -> (String?, [String: JSONValue]) {
        if random.below(3) == 0 {
            var members: [String: JSONValue] = ["name": .string(String(repeating: "x", count: random.below(6)))]
            if random.below(2) == 0 { members["r"] = ["$ref": .string(["pub-s", "alice-s"][random.below(2)])] }
            return ("S", members)
        }
        var members: [String: JSONValue] = [:]
        for _ in 0..<random.below(4) { members[keys[random.below(keys.count)]] = value(&random, depth: 2) }
        return (nil, members)
    }

    /// A key path of one to three keys, most through `r` (a reference) or a computed property.
    static func keyPath(_ random: inout SplitMix64) -> String {
        let length = [1, 1, 2, 2, 2, 3, 3][random.below(7)]
        return (0..<length).map { index in index == 0 ? ["r", "r", "name", "tags", "items", "c", "rn", "deep"][random.below(8)]
            : pathKeys[random.below(pathKeys.count)] }.joined(separator: ".")
    }

    static func options(_ random: inout SplitMix64) -> JSONValue {
        .array((["new"] + ["old", "prior", "initial"].filter { _ in random.below(2) == 0 }).map(JSONValue.string))
    }

    /// One operation of alice's, bob's or root's on readable objects (the same in both worlds).
    static func operation(_ random: inout SplitMix64, rev: Int64) -> (String, String, [String: JSONValue]) {
        let reader = random.below(2) == 0 ? "alice" : "bob"
        let target = JSONValue.string(targets[random.below(targets.count)])
        let object = JSONValue.string(readable[random.below(readable.count)])
        let path = JSONValue.string(keyPath(&random))
        switch random.below(22) {
        case 0...3:
            return (reader, "get", ["object": target, "keyPath": path])
        case 4, 5:
            return (reader, "get", ["object": target])
        case 6, 7:
            var params: [String: JSONValue] = ["object": object, "keyPath": path, "options": options(&random)]
            if random.below(3) == 0 { params["sinceRev"] = .int(max(0, rev - Int64(random.below(12)))) }
            return (reader, "observe", params)
        case 8, 9:
            var params: [String: JSONValue] = ["pattern": .string(["pub-*", "alice-*", "*", "pub-c"][random.below(4)]),
                                               "options": options(&random)]
            if random.below(4) != 0 { params["keyPath"] = path }
            if random.below(3) == 0 { params["sinceRev"] = .int(max(0, rev - Int64(random.below(12)))) }
            if random.below(2) == 0 {
                // A live query whose filter reads through references (an equality goes to the bucket index).
                let read = keyPath(&random)
                params["where"] = .string(["\(read) != null", "\(read) == 'SECRETWORD'", "\(read) == 'a' && name != null",
                                           "\(read) > 0", "!\(read)"][random.below(5)])
            }
            return (reader, "observe", params)
        case 10...14:
            // Root, who reads everything, writes only free-form objects: a class's `ref` check would give
            // root (rightly) different answers in the two worlds.
            let classed = object.stringValue!.hasSuffix("-s") || object.stringValue!.hasSuffix("-c")
            let writer = random.below(3) == 0 && !classed ? "root" : "alice"
            // (Root's key paths stay in the object: through a reference, root would reach what differs.)
            let key = random.below(4) != 0 || writer == "root" ? JSONValue.string(keys[random.below(keys.count)]) : path
            return (writer, "set", ["object": object, "keyPath": key, "value": value(&random, depth: 2)])
        case 15:
            let op = ["insert", "remove", "replace"][random.below(3)]
            var params: [String: JSONValue] = ["object": object, "keyPath": .string(["tags", "items", "rs"][random.below(3)])]
            if op != "insert" { params["index"] = .int(Int64(random.below(2))) }
            if op != "remove" { params["value"] = value(&random, depth: 1) }
            return ("alice", op, params)
        case 16:
            let className = ["Holder", "C", "S"][random.below(3)]
            var members: [String: JSONValue] = [:]
            if className == "S" { members["name"] = "n" } else { members["r"] = ["$ref": target] }
            if className == "Holder", random.below(2) == 0 { members["rs"] = [["$ref": target]] }
            return ("alice", "create", ["object": .string("alice-n\(random.below(1000))"), "class": .string(className),
                                        "values": .object(members)])
        case 17:
            return ("alice", "bind", ["from": ["object": target, "keyPath": path],
                                      "to": ["object": "alice-2", "keyPath": .string("copy\(random.below(3))")]])
        case 18:
            return (reader, "info", ["object": target])
        case 19:
            var params: [String: JSONValue] = ["limit": .int(Int64(1 + random.below(3)))]
            if random.below(2) == 0 { params["after"] = target }
            return (reader, "list", params)
        default:
            return ("secrets", "", [:])
        }
    }

    /// The same set-up in a world: classes, then readable objects (shared values), then its own secrets.
    static func setUp(_ world: World, shared seed: UInt64) throws {
        var random = SplitMix64(state: seed)
        for definition: JSONValue in [
            ["name": "S", "properties": ["name": ["type": "string"], "r": ["type": "ref", "class": "S"]]],
            ["name": "Holder", "properties": ["r": ["type": "ref", "class": "S"],
                                              "rs": ["type": "array", "items": ["type": "ref", "class": "S"]]]],
            ["name": "C", "properties": ["r": ["type": "ref", "class": "S"]], "computed": ["c": "r.name", "rn": "r.r.name"]],
        ] {
            try world.run("root", "defineClass", ["class": definition])
        }
        for id in readable {
            var params: [String: JSONValue] = ["object": .string(id)]
            if id.hasSuffix("-s") {
                // Readable objects of class S, for class C's references (set-up must not depend on a world).
                params["class"] = "S"
                params["values"] = ["name": .string("s\(random.below(9))")]
            } else if id.hasSuffix("-c") {
                params["class"] = "C"
                params["values"] = ["r": ["$ref": .string(id.hasPrefix("pub") ? "pub-s" : "alice-s")]]
            } else {
                var members: [String: JSONValue] = [:]
                for key in keys where random.below(2) == 0 { members[key] = value(&random, depth: 2) }
                members["r"] = ["$ref": .string(targets[random.below(targets.count)])]
                params["values"] = .object(members)
            }
            try world.run("root", "create", params)
        }
        for _ in 0..<6 { try world.changeSecrets() }
        try world.flush()
    }

    @Test("random operations through references into unreadable objects: alice and bob see the same in both worlds")
    func readersCannotTellTheUnreadableWorldsApart() throws {
        let environment = ProcessInfo.processInfo.environment
        let steps = environment["KVOD_READ_RULE_STEPS"].flatMap(Int.init) ?? 600
        let seed = environment["KVOD_READ_RULE_SEED"].flatMap(UInt64.init) ?? 24
        let worlds = [try World(seed: seed &* 31 &+ 1), try World(seed: seed &* 31 &+ 2)]
        for world in worlds { try Self.setUp(world, shared: seed) }
        var random = SplitMix64(state: seed ^ 0x5EC2E7)
        var rev: Int64 = 0
        for step in 0..<steps {
            let (user, op, params) = Self.operation(&random, rev: rev)
            for world in worlds {
                if user == "secrets" { try world.changeSecrets() } else { try world.run(user, op, params) }
                try world.flush()
            }
            // (`get` replies carry the current revision; `ping` does not.)
            rev = try worlds[0].root.call("get", ["object": "pub-s"])["rev"]?.intValue ?? -1
            let otherRev = try worlds[1].root.call("get", ["object": "pub-s"])["rev"]?.intValue ?? -2
            guard rev == otherRev else {
                Issue.record("step \(step) (seed \(seed)), \(user) \(op) \(params): revisions \(rev) and \(otherRev) differ")
                return
            }
            for reader in ["alice", "bob"] {
                let (a, b) = (worlds[0].transcripts[reader]!, worlds[1].transcripts[reader]!)
                guard a != b else { continue }
                let at = zip(a, b).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(a.count, b.count)
                Issue.record("""
                    step \(step) (seed \(seed)), \(user) \(op) \(params): \(reader) can tell the worlds apart
                    world A: \(a.count > at ? a[at] : "<nothing>")
                    world B: \(b.count > at ? b[at] : "<nothing>")
                    """)
                return
            }
        }
        // The worlds did differ where reading was allowed, and the readers were refused something.
        for world in worlds {
            for id in Self.secrets { try world.run("root", "get", ["object": .string(id)]) }
        }
        #expect(worlds[0].transcripts["root"] != worlds[1].transcripts["root"])
        if environment["KVOD_READ_RULE_DUMP"] != nil {
            for reader in ["alice", "bob"] { print(worlds[0].transcripts[reader]!.joined(separator: "\n")) }
        }
        let bobs = worlds[0].transcripts["bob"]!.joined(separator: "\n")
        let alices = worlds[0].transcripts["alice"]!.joined(separator: "\n")
        #expect(bobs.contains("forbidden") && alices.contains("forbidden"))
        #expect(bobs.contains("\"event\"") && alices.contains("\"event\""))
    }
}
