import Foundation
import KVOWireProbe
import KVOJSON
@testable import KVOServer
import Testing

/// The read rule for writers (issue 41, item 2), as non-interference over two real kvods: carol may write
/// `secret-*` but not read it. In both worlds the same objects exist, but what they hold differs (types,
/// lengths, key names, a reference or a plain object, the class, a ttl or none). Carol sends every write row of
/// the operations table (`ProtocolOperation.allCases` where the row writes: a new write row is walked by its
/// own example) at key paths, indexes and values chosen so that each write applies in both worlds or in
/// neither, with and without conditions and `ttl`, in a `batch` too; before each, root puts the objects back
/// as its world has them. Every reply and event carol receives must be the same in both worlds, byte for
/// byte: a refusal that named a type, a length, a key or an index would differ.
extension ReadRuleNoninterferenceTests {
    /// An object carol may write but not read: its key paths (each one refused in both worlds, or applied in
    /// both) and the value its writes carry.
    struct WriterTarget {
        let object: String
        let paths: [String]
        let value: JSONValue
    }

    /// Where carol writes: the free-form secret, the classed secret (class PA in one world, PB in the other:
    /// the value is refused by both), and the free-form secret through a readable object's reference.
    static let writerTargets: [WriterTarget] = {
        let paths = ["s.x", "zz.x", "deep.a.x", "tags.9", "ref.x.y", "fresh", "s", "tags"]
        return [
            WriterTarget(object: "secret-w", paths: paths, value: ["v": [1, "two"]]),
            WriterTarget(object: "secret-c", paths: ["n", "c", "tags", "tags.9", "fresh", "s.x", "$class"], value: [[true]]),
            WriterTarget(object: "pub-w", paths: paths.map { "r." + $0 }, value: "through"),
        ]
    }()

    /// What root stores in world `index` (0 or 1) before each of carol's writes: same ids, different contents.
    static func writerWorld(_ index: Int) -> [(id: String, className: String?, values: JSONValue, ttl: Int64?)] {
        index == 0
            ? [("secret-w", nil, ["s": "text", "tags": [1, 2, 3], "n": 5, "deep": ["a": 1], "ref": ["$ref": "pub-w"]], 600_000),
               ("secret-c", "PA", ["n": 3, "tags": [1]], nil)]
            : [("secret-w", nil, ["s": 17, "tags": [true, "t"], "n": 6.5, "deep": ["b": [1, 2]], "zz": 3, "ref": ["a": 1]], nil),
               ("secret-c", "PB", ["n": "x", "tags": ["a", "b"], "c": "y"], 900_000)]
    }

    /// A write row's example made carol's: `object` "o" becomes `target`, other example objects new secret
    /// ids, `keyPath` the given path, `index` the given index, `value`(s) the target's value; nested requests
    /// (a batch's `ops`) alike.
    static func writerRequest(_ example: JSONValue, target: WriterTarget, path: String, index: Int64) -> JSONValue {
        switch example {
        case let .object(members):
            var result: [String: JSONValue] = [:]
            for (key, member) in members {
                switch (key, member) {
                case ("object", .string(let id)): result[key] = .string(id == "o" ? target.object : "secret-new-\(id)")
                case ("keyPath", .string): result[key] = .string(path)
                case ("index", .int): result[key] = .int(index)
                case ("value", _): result[key] = target.value
                case ("values", _): result[key] = ["made": target.value]
                default: result[key] = writerRequest(member, target: target, path: path, index: index)
                }
            }
            return .object(result)
        case let .array(elements):
            return .array(elements.map { writerRequest($0, target: target, path: path, index: index) })
        default:
            return example
        }
    }

    /// Every request carol sends: each write row at each target, path and index, then with each condition
    /// and with `ttl` where the row takes them, and each as the second part of a batch.
    static func writerRequests() throws -> [JSONValue] {
        var requests: [JSONValue] = []
        var seen = Set<String>()
        func add(_ request: JSONValue) {
            if seen.insert(request.description).inserted { requests.append(request) }
        }
        for operation in ProtocolOperation.allCases where operation.declaration.isWrite {
            let declaration = operation.declaration
            let example = try JSONParser.parse(declaration.example)
            for target in writerTargets {
                for path in target.paths {
                    for index: Int64 in [0, 9] {
                        let request = writerRequest(example, target: target, path: path, index: index)
                        add(request)
                        if declaration.batchable {
                            add(["op": "batch", "ops": [["op": "set", "object": "pub-w", "keyPath": "n",
                                                                     "value": .int(index)], request]])
                        }
                        guard case var .object(members) = request, path == target.paths[0] else { continue }
                        if declaration.modifiers.contains(.ttl) { add(.object(members.merging(["ttl": 60_000]) { $1 })) }
                        guard declaration.modifiers.contains(.conditions) else { continue }
                        for condition: (String, JSONValue) in [("ifExists", true), ("ifAbsent", true), ("ifRev", 1),
                                                               ("ifEquals", ["keyPath": .string(path), "value": 1])] {
                            members[condition.0] = condition.1
                            add(.object(members))
                            members[condition.0] = nil
                        }
                    }
                }
            }
        }
        return requests
    }

    /// Root's objects of this world, made again (the same number of revisions in both worlds).
    static func resetWriterWorld(_ world: World, _ index: Int) throws {
        if try world.root.request("get", ["object": "pub-w"])["ok"] != true {
            try world.root.call("create", ["object": "pub-w", "values": ["r": ["$ref": "secret-w"], "n": 0]])
        }
        for id in ["secret-w", "secret-c", "secret-new-o2", "secret-new-o3"]
        where try world.root.request("get", ["object": .string(id)])["ok"] == true {
            try world.root.call("delete", ["object": .string(id)])
        }
        for (id, className, values, ttl) in writerWorld(index) {
            var params: [String: JSONValue] = ["object": .string(id), "values": values]
            if let className { params["class"] = .string(className) }
            if let ttl { params["ttl"] = .int(ttl) }
            try world.root.call("create", params)
        }
    }

    @Test("a user who may write but not read gets the same replies and events whatever the object holds, for every write row")
    func writersCannotTellTheUnreadableWorldsApart() throws {
        let worlds = [try World(seed: 1), try World(seed: 2)]
        var carols: [KVOConnection] = []
        for (index, world) in worlds.enumerated() {
            for definition: JSONValue in [
                ["name": "PA", "properties": ["n": ["type": "integer"], "tags": ["type": "array", "items": ["type": "integer"]]],
                 "computed": ["c": "n + 1"]],
                ["name": "PB", "properties": ["n": ["type": "string"], "c": ["type": "string"],
                                              "tags": ["type": "array", "items": ["type": "string"]]]],
            ] {
                try world.root.call("defineClass", ["class": definition])
            }
            try Self.resetWriterWorld(world, index)
            let carol = try ReadRuleOverTCPTests.login(world.server, "carol")
            // What carol may read: the readable object whose reference leads into the secret, observed.
            try carol.call("observe", ["object": "pub-w", "keyPath": "n", "options": ["new", "old"]])
            try carol.call("observe", ["pattern": "pub-*", "options": ["new"]])
            carols.append(carol)
        }
        let requests = try Self.writerRequests()
        var transcripts: [[String]] = [[], []]
        var refusals = Set<String>()
        var applied = 0
        for request in requests {
            guard case var .object(params) = request, let op = params.removeValue(forKey: "op")?.stringValue else { continue }
            for (index, world) in worlds.enumerated() {
                try Self.resetWriterWorld(world, index)
                let reply = try carols[index].request(op, params)
                try carols[index].call("ping")
                var lines = carols[index].pendingEvents.map(\.description)
                while let event = try carols[index].nextEvent(timeout: 0) { lines.append(event.description) }
                lines.append(reply.description)
                transcripts[index].append(contentsOf: lines)
                if index == 0 {
                    if reply["ok"] == true { applied += 1 } else { refusals.insert(reply["error"]?["code"]?.stringValue ?? "?") }
                }
            }
            guard transcripts[0] == transcripts[1] else {
                let at = zip(transcripts[0], transcripts[1]).enumerated().first { $0.element.0 != $0.element.1 }?.offset
                    ?? min(transcripts[0].count, transcripts[1].count)
                Issue.record("""
                    carol can tell the worlds apart with \(request)
                    world A: \(transcripts[0].count > at ? transcripts[0][at] : "<nothing>")
                    world B: \(transcripts[1].count > at ? transcripts[1][at] : "<nothing>")
                    """)
                return
            }
        }
        // Not vacuous: the worlds differ for root, carol's writes both applied and were refused, and the
        // refusals that depend on what the secrets hold became the one `forbidden`.
        let roots = try worlds.map { world in try ["secret-w", "secret-c"].map { try world.root.request("get", ["object": .string($0)]).description } }
        #expect(roots[0] != roots[1])
        #expect(applied > 50)
        #expect(refusals.contains("forbidden") && refusals.contains("conflict") && refusals.contains("read_only"))
        let lines = transcripts[0].joined(separator: "\n")
        #expect(lines.contains(#""permission":"read""#))
        // `touch` of a secret tells no deadline (of a readable object without a ttl: `null`).
        #expect(lines.contains(#""expiresAt":null"#) && !lines.contains(#""expiresAt":1"#))
        #expect(lines.contains("\"event\""))
    }
}
