import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// The read rule over the real kvod (issue 24, items 1–3): nothing of an object a user may not read
/// (value, type, length, key names, existence, class) reaches that user, through any reply, event,
/// replay or error. One test per path the outside review found leaking; `ReadRuleNoninterferenceTests`
/// then walks every operation and event path at random.
///
/// Users: alice has `alice-*=read,write,admin` and `pub-*=read,write`; bob has `pub-*=read`; root has
/// everything. `secret-*` is readable by neither alice nor bob. Carol (`ReadRuleWriterNoninterferenceTests`) has
/// `secret-*=write` and `pub-*=read,write`: she may write the secrets but not read them.
@Suite struct ReadRuleOverTCPTests {
    static let password = "pw"
    static let users: [(String, [String])] = [
        ("root", ["*=read,write,admin"]),
        ("alice", ["alice-*=read,write,admin", "pub-*=read,write"]),
        ("bob", ["pub-*=read"]),
        ("carol", ["secret-*=write", "pub-*=read,write"]),
    ]

    /// A kvod with the three users, in memory.
    static func server() throws -> (KVODProcess, TemporaryDirectory) {
        let scratch = try TemporaryDirectory("read-rule")
        let usersFile = scratch.appending("users.json")
        for (name, rules) in users {
            try KVODUserTool.addUser(name, password: password, rules: rules, usersFile: usersFile)
        }
        return (try KVODProcess(["--users", usersFile]), scratch)
    }

    static func login(_ server: KVODProcess, _ user: String) throws -> KVOConnection {
        let connection = try server.connect()
        try connection.call("auth", ["user": .string(user), "password": .string(password)])
        return connection
    }

    private func error(_ reply: JSONValue) -> (code: String?, message: String?) {
        (reply["error"]?["code"]?.stringValue, reply["error"]?["message"]?.stringValue)
    }

    /// Every line `connection` has received so far (events), after a ping has flushed them.
    private func drained(_ connection: KVOConnection) throws -> [String] {
        try connection.call("ping")
        var lines: [String] = []
        while let event = try connection.nextEvent(timeout: 0) { lines.append(event.description) }
        return lines
    }

    @Test("item 1: a pattern observation never carries a value read through an unreadable object, live, prior or replayed")
    func patternObservationsMaskUnreadableReadings() throws {
        let (server, _) = try Self.server()
        let root = try Self.login(server, "root")
        try root.call("create", ["object": "secret-1", "values": ["deep": "SECRET-V1", "name": "SECRET-N1"]])
        try root.call("create", ["object": "secret-2", "values": ["deep": "SECRET-V2"]])
        try root.call("create", ["object": "pub-2", "values": ["deep": "public-2"]])
        let alice = try Self.login(server, "alice")
        let start = try alice.call("ping")["rev"]?.intValue ?? 0
        let live = try alice.call("observe", ["pattern": "alice-ex*", "keyPath": "r.deep",
                                              "options": ["new", "old", "prior", "initial"]])["sub"]!
        try alice.call("create", ["object": "alice-ex1", "values": ["r": ["$ref": "secret-1"]]])
        try alice.call("set", ["object": "alice-ex1", "keyPath": "r", "value": ["$ref": "secret-2"]])
        try alice.call("set", ["object": "alice-ex1", "keyPath": "r", "value": ["$ref": "pub-2"]])
        try alice.call("set", ["object": "alice-ex1", "keyPath": "r", "value": ["$ref": "secret-1"]])
        try alice.call("set", ["object": "alice-ex1", "keyPath": "r", "value": .null])
        try alice.call("delete", ["object": "alice-ex1"])
        let events = try drained(alice)
        for event in events { #expect(!event.contains("SECRET"), "\(event)") }
        // What alice sees is what she would see of a missing object: into pub-2, out of it, and nothing else.
        let changes = events.filter { $0.contains("\"sub\":\(live)") && $0.contains("pathChanged") && !$0.contains("notificationIsPrior") }
        expectEqual(changes.count, 2, "\(events)")
        expectEqual(changes.first?.contains("\"new\":\"public-2\""), true, "\(changes)")
        expectEqual(changes.last?.contains("\"old\":\"public-2\""), true, "\(changes)")
        // Replayed, the same events and nothing more.
        let replayed = try alice.call("observe", ["pattern": "alice-ex*", "keyPath": "r.deep", "sinceRev": .int(start),
                                                  "options": ["new", "old", "prior"]])["sub"]!
        let replay = try drained(alice)
        for event in replay { #expect(!event.contains("SECRET"), "\(event)") }
        #expect(replay.filter { $0.contains("\"sub\":\(replayed)") && $0.contains("pathChanged")
                    && !$0.contains("notificationIsPrior") }.count == 2,
                "\(replay)")
    }

    @Test("item 1: a reader watching a readable object gets no old value when an admin re-points it away from a secret one")
    func readerNeverSeesTheSecretAnAdminRepointsAwayFrom() throws {
        let (server, _) = try Self.server()
        let root = try Self.login(server, "root")
        try root.call("defineClass", ["class": ["name": "T", "properties": ["v": ["type": "string"], "items": ["type": "array"]]]])
        try root.call("defineClass", ["class": ["name": "Holder", "properties": ["r": ["type": "ref", "class": "T"]],
                                               "computed": ["rv": "r.v"]]])
        try root.call("create", ["object": "secret-3", "class": "T",
                                 "values": ["v": "SECRET-V3", "items": [["name": "SECRET-I"]]]])
        try root.call("create", ["object": "pub-3", "class": "T", "values": ["v": "open", "items": [["name": "open-item"]]]])
        try root.call("create", ["object": "pub-1", "values": ["r": ["$ref": "secret-3"]]])
        try root.call("create", ["object": "pub-c", "class": "Holder", "values": ["r": ["$ref": "secret-3"]]])
        let bob = try Self.login(server, "bob")
        for keyPath in ["r.v", "r.items.@unionOfObjects.name", "rv"] {
            try bob.call("observe", ["pattern": "pub-*", "keyPath": .string(keyPath),
                                     "options": ["new", "old", "prior", "initial"]])
        }
        try root.call("set", ["object": "pub-1", "keyPath": "r", "value": ["$ref": "pub-3"]])
        try root.call("set", ["object": "pub-c", "keyPath": "r", "value": ["$ref": "pub-3"]])
        try root.call("set", ["object": "pub-1", "keyPath": "r", "value": ["$ref": "secret-3"]])
        let events = try drained(bob)
        #expect(!events.isEmpty)
        for event in events { #expect(!event.contains("SECRET"), "\(event)") }
        #expect(events.contains { $0.contains("\"new\":\"open\"") }, "\(events)")
    }

    @Test("item 2: an error through a reference into an unreadable object is forbidden, whatever follows in the key path",
          arguments: ["r.name.zz", "r.nope.zz", "r.tags.0.zz", "r.tags.1.zz", "r.tags.5.zz", "r.name.@count",
                      "r.tags.@count", "r.n.zz", "r.tags.@sum.x", "r.missing.@unionOfArrays.x", "r.name"])
    func errorsThroughAReferenceAreForbidden(keyPath: String) throws {
        let (server, _) = try Self.server()
        let root = try Self.login(server, "root")
        try root.call("create", ["object": "secret-1", "values": ["name": "S", "tags": ["t"], "n": 4]])
        try root.call("create", ["object": "pub-ref", "values": ["r": ["$ref": "secret-1"]]])
        try root.call("create", ["object": "pub-gone", "values": ["r": ["$ref": "secret-9"]]])
        let bob = try Self.login(server, "bob")
        for object in ["pub-ref", "pub-gone"] {
            let reply = try bob.request("get", ["object": .string(object), "keyPath": .string(keyPath)])
            expectEqual(error(reply).code, "forbidden", "\(object) \(keyPath): \(reply)")
            expectEqual(reply["error"]?["object"]?.stringValue, (object == "pub-ref" ? "secret-1" : "secret-9"))
            let observe = try bob.request("observe", ["object": .string(object), "keyPath": .string(keyPath)])
            expectEqual(error(observe).code, "forbidden", "\(object) \(keyPath): \(observe)")
        }
    }

    @Test("item 2: a refusal names the first object the reader reached, never one behind another refused object")
    func refusalNamesTheFirstObjectReached() throws {
        let (server, _) = try Self.server()
        let root = try Self.login(server, "root")
        // secret-b refers to secret-a: a denial naming secret-a would tell bob what secret-b holds.
        try root.call("create", ["object": "secret-a", "values": ["name": "A"]])
        try root.call("create", ["object": "secret-b", "values": ["next": ["$ref": "secret-a"]]])
        try root.call("create", ["object": "pub-1", "values": ["r": ["$ref": "secret-b"]]])
        let bob = try Self.login(server, "bob")
        for op in ["get", "observe"] {
            let reply = try bob.request(op, ["object": "pub-1", "keyPath": "r.next.name"])
            expectEqual(reply["error"]?["object"]?.stringValue, "secret-b", "\(op): \(reply)")
            #expect(!reply.description.contains("secret-a"), "\(op): \(reply)")
        }
    }

    @Test("item 3: a class's ref check gives one identical refusal for any object the writer cannot read")
    func refCheckDoesNotTellAboutUnreadableObjects() throws {
        let (server, _) = try Self.server()
        let root = try Self.login(server, "root")
        try root.call("defineClass", ["class": ["name": "S", "properties": ["name": ["type": "string"]]]])
        try root.call("defineClass", ["class": ["name": "Holder", "properties": ["r": ["type": "ref", "class": "S"],
                                                                                  "rs": ["type": "array", "items": ["type": "ref", "class": "S"]]]]])
        try root.call("create", ["object": "secret-s", "class": "S", "values": ["name": "x"]])
        try root.call("create", ["object": "secret-plain", "values": ["name": "x"]])
        let alice = try Self.login(server, "alice")
        try alice.call("create", ["object": "alice-h", "class": "Holder", "values": ["rs": []]])
        var messages: [String: Set<String>] = [:]
        for (index, target) in ["secret-s", "secret-plain", "secret-missing"].enumerated() {
            let value: JSONValue = ["$ref": .string(target)]
            let create = try alice.request("create", ["object": .string("alice-\(index)"), "class": "Holder",
                                                      "values": ["r": value]])
            let set = try alice.request("set", ["object": "alice-h", "keyPath": "r", "value": value])
            let insert = try alice.request("insert", ["object": "alice-h", "keyPath": "rs", "value": value])
            for (op, reply) in [("create", create), ("set", set), ("insert", insert)] {
                expectEqual(error(reply).code, "invalid_value", "\(target): \(reply)")
                messages[op, default: []].insert((error(reply).message ?? "").replacingOccurrences(of: target, with: "ID"))
            }
        }
        // One wording for the three objects (per operation, the id aside).
        #expect(messages.values.allSatisfy { $0.count == 1 }, "\(messages)")
        // A readable object still gets the precise answers.
        try alice.call("create", ["object": "alice-s", "class": "S", "values": ["name": "y"]])
        try alice.call("set", ["object": "alice-h", "keyPath": "r", "value": ["$ref": "alice-s"]])
        #expect(error(try alice.request("set", ["object": "alice-h", "keyPath": "r", "value": ["$ref": "alice-none"]]))
            .message?.contains("does not exist") == true)
    }

    @Test("list: `more` tells a reader nothing of the unreadable ids after its page")
    func listMoreDependsOnReadableIdsOnly() throws {
        let (server, _) = try Self.server()
        let root = try Self.login(server, "root")
        try root.call("create", ["object": "pub-1"])
        try root.call("create", ["object": "pub-2"])
        let bob = try Self.login(server, "bob")
        let before = try bob.call("list", ["limit": 5])
        try root.call("create", ["object": "secret-1"])
        let after = try bob.call("list", ["limit": 5])
        #expect(before["more"] == after["more"] && before["more"] == false, "\(before) \(after)")
        expectEqual(try bob.call("list", ["limit": 1, "after": "pub-2"])["more"], false)
        expectEqual(try bob.call("list", ["limit": 2])["more"], true)
    }

    @Test("issue 41: a writer who may not read gets one forbidden for what the object holds, and no deadline from touch")
    func writerWhoMayNotRead() throws {
        let (server, _) = try Self.server()
        let root = try Self.login(server, "root")
        try root.call("create", ["object": "secret-1", "values": ["s": "text", "list": [1, 2, 3]], "ttl": 600])
        let carol = try Self.login(server, "carol")
        let refusal = #"{"code":"forbidden","message":"'read' on object 'secret-1' is not allowed for user 'carol'","object":"secret-1","permission":"read"}"#
        for (op, params) in [
            ("insert", ["keyPath": "list", "index": 10, "value": 1]),  // was: "insertion index 10 is out of range (3 elements)"
            ("set", ["keyPath": "s.x", "value": 1]),                   // was: "'s' is a string, not an object"
            ("set", ["keyPath": "zz.x", "value": 1]),                  // was: "'zz' does not exist"
            ("remove", ["keyPath": "s", "index": 0]),
            ("replace", ["keyPath": "list.7", "index": 0, "value": 1]),
        ] as [(String, [String: JSONValue])] {
            let reply = try carol.request(op, params.merging(["object": "secret-1"]) { $1 })
            expectEqual(reply["error"]?.description, refusal, "\(op) \(params): \(reply)")
        }
        // What she may know: her write was made (its revision), the object exists, `$class` is never writable.
        let written = try carol.call("set", ["object": "secret-1", "keyPath": "s", "value": "mine"])
        #expect(written["rev"] != nil)
        expectEqual(try carol.request("set", ["object": "secret-9", "keyPath": "s.x", "value": 1])["error"]?["code"], "not_found")
        expectEqual(try carol.request("set", ["object": "secret-1", "keyPath": "$class", "value": "X"])["error"]?["code"], "read_only")
        // `touch` moves the deadline but does not tell it (root, who may read, is told).
        let touched = try carol.call("touch", ["object": "secret-1"])
        #expect(touched["expiresAt"] == nil && touched["rev"] != nil, "\(touched)")
        #expect(try root.call("touch", ["object": "secret-1"])["expiresAt"]?.intValue != nil)
        expectEqual(try root.call("get", ["object": "secret-1", "keyPath": "s"])["value"], "mine")
    }
}
