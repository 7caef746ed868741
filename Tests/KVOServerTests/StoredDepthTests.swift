import Testing
@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer
import KVOJSON

/// `StoredDepth`: the relation between the stored-depth limit and every reader's limit, the deepest
/// envelopes actually written around a value at the limit, and the engine's enforcement on each write
/// path (issue 10 item 1).
@Suite("stored depth limit")
struct StoredDepthTests {
    private static func nestedArrays(_ levels: Int) -> JSONValue {
        var value: JSONValue = 0
        for _ in 0..<levels { value = .array([value]) }
        return value
    }

    private static func depth(_ bytes: [UInt8]) -> Int {
        (try? JSONParser.parse(bytes))?.nestingDepth(upTo: Int.max - 1) ?? -1
    }

    @Test("every reader accepts the deepest stored value inside the deepest envelope")
    func readersAcceptStoredValues() {
        #expect(StoredDepth.readersAcceptStoredValues)
        #expect(JSONParser.maximumDepth >= StoredDepth.maximum + StoredDepth.envelopeAllowance)
    }

    @Test("nestingDepth counts levels as the parser does and stops past the limit")
    func nestingDepthCounts() throws {
        expectEqual(JSONValue.int(1).nestingDepth(upTo: 5), 0)
        expectEqual(JSONValue.object([:]).nestingDepth(upTo: 5), 1)
        expectEqual(try JSONParser.parse(Array(#"{"a":[[1]],"b":{}}"#.utf8)).nestingDepth(upTo: 5), 3)
        expectEqual(Self.nestedArrays(200).nestingDepth(upTo: 10), 11)
        expectEqual(Self.nestedArrays(10).nestingDepth(upTo: 10), 10)
    }

    @Test("replies, events and history rows around an object at the limit stay within the envelope allowance")
    func envelopesFitTheAllowance() throws {
        let limit = StoredDepth.maximum
        let allowed = limit + StoredDepth.envelopeAllowance
        let object = JSONValue.object(["v": Self.nestedArrays(limit - 1)])
        expectEqual(object.nestingDepth(upTo: limit), limit)

        var reply: [UInt8] = []
        ReplyEncoder.success(id: 1, fields: [("rev", 1), ("value", object)], into: &reply)
        var classes: [UInt8] = []
        ReplyEncoder.success(id: 1, fields: [("classes", .array([object]))], into: &classes)
        var event = EventEncoder(ChangeNotification(
            object: "o", keyPath: "v", reason: .valueChanged, rev: 2, kind: .setting, isPrior: false,
            old: object, new: object, recipients: []))
        let eventLine = event.line(subscription: 1, options: [.new, .old])
        var rows: [[UInt8]] = []
        for change: RecordedChange in [
            .created(object), .deleted(object),
            .set(path: ["v"], old: Self.nestedArrays(limit - 1), new: Self.nestedArrays(limit - 1)),
            .array(ArrayChangeRecord(path: ["v"], kind: .replacement, indexes: [0], old: [Self.nestedArrays(limit - 2)],
                                     new: [Self.nestedArrays(limit - 2)])),
        ] {
            var row: [UInt8] = []
            change.writeJSON(into: &row)
            rows.append(row)
        }
        for (name, bytes) in [("get reply", reply), ("classes reply", classes), ("event", eventLine)]
            + rows.enumerated().map({ ("history row \($0.offset)", $0.element) }) {
            let depth = Self.depth(bytes)
            #expect(depth > limit && depth <= allowed, "\(name) nests \(depth) levels")
        }
    }

    @Test("every write path refuses a value over the limit with too_large and changes nothing")
    func engineRefusesEveryWritePath() throws {
        let limit = StoredDepth.maximum
        let engine = KVOEngine(recordsCommitBatches: true)
        var notifications: [ChangeNotification] = []
        _ = try engine.create("d", values: ["items": [1], "a": ["b": [:]], "link": ["$ref": "t"]], notifications: &notifications)
        _ = try engine.create("t", values: [:], notifications: &notifications)
        _ = engine.takeCommitBatch()
        let before = (engine.revision, try engine.get("d", keyPath: nil), try engine.get("t", keyPath: nil))

        func expectRefused(_ what: String, _ write: () throws(KVOError) -> Void) {
            do {
                try write()
                Issue.record("\(what) was accepted")
            } catch {
                expectEqual(error.code, .tooLarge, "\(what): \(error)")
            }
        }
        expectRefused("create") { () throws(KVOError) in
            _ = try engine.create("new", values: ["v": Self.nestedArrays(limit)], notifications: &notifications)
        }
        expectRefused("set") { () throws(KVOError) in
            _ = try engine.set("d", keyPath: try KeyPath("a.b.c"), value: Self.nestedArrays(limit - 2), notifications: &notifications)
        }
        expectRefused("set through a reference") { () throws(KVOError) in
            _ = try engine.set("d", keyPath: try KeyPath("link.c"), value: Self.nestedArrays(limit), notifications: &notifications)
        }
        expectRefused("set of an element") { () throws(KVOError) in
            _ = try engine.set("d", keyPath: try KeyPath("items.0"), value: Self.nestedArrays(limit - 1), notifications: &notifications)
        }
        expectRefused("insert") { () throws(KVOError) in
            _ = try engine.mutateArray("d", keyPath: try KeyPath("items"), .insert(indexes: nil, values: [Self.nestedArrays(limit - 1)]),
                                       notifications: &notifications)
        }
        expectRefused("replace") { () throws(KVOError) in
            _ = try engine.mutateArray("d", keyPath: try KeyPath("items"), .replace(indexes: [0], values: [Self.nestedArrays(limit - 1)]),
                                       notifications: &notifications)
        }
        expectRefused("defineClass") { () throws(KVOError) in
            _ = try engine.defineClass(.object(["name": "C", "properties": .object(["p": .object(["type": "array",
                "default": Self.nestedArrays(limit - 2)])])]))
        }
        #expect(notifications.isEmpty)
        #expect(engine.takeCommitBatch().isEmpty)
        expectEqual(engine.revision, before.0)
        expectEqual(try engine.get("d", keyPath: nil), before.1)
        expectEqual(try engine.get("t", keyPath: nil), before.2)

        // One level less is accepted on each path.
        _ = try engine.create("new", values: ["v": Self.nestedArrays(limit - 1)], notifications: &notifications)
        _ = try engine.set("d", keyPath: try KeyPath("a.b.c"), value: Self.nestedArrays(limit - 3), notifications: &notifications)
        _ = try engine.set("d", keyPath: try KeyPath("link.c"), value: Self.nestedArrays(limit - 1), notifications: &notifications)
        _ = try engine.set("d", keyPath: try KeyPath("items.0"), value: Self.nestedArrays(limit - 2), notifications: &notifications)
        _ = try engine.mutateArray("d", keyPath: try KeyPath("items"), .insert(indexes: nil, values: [Self.nestedArrays(limit - 2)]),
                                   notifications: &notifications)
        _ = try engine.defineClass(.object(["name": "C", "properties": .object(["p": .object(["type": "array",
            "default": Self.nestedArrays(limit - 3)])])]))
    }

    @Test("a computed value deeper than the limit reads as null, so no reply or event carries it")
    func deepComputedValuesReadAsNull() throws {
        let limit = StoredDepth.maximum
        let engine = KVOEngine()
        var notifications: [ChangeNotification] = []
        _ = try engine.defineClass(json: #"{"name": "W", "properties": {"deep": {"type": "array"}}, "computed": {"wrapped": "[[deep]]", "once": "[deep]"}}"#)
        _ = try engine.create("w", values: ["deep": Self.nestedArrays(limit - 2)], className: "W", notifications: &notifications)
        // deep is 126 levels: once is 127 (fits), wrapped 128 (fits).
        expectEqual(try engine.get("w", keyPath: KeyPath("wrapped")), .array([.array([Self.nestedArrays(limit - 2)])]))
        _ = try engine.set("w", keyPath: KeyPath("deep"), value: Self.nestedArrays(limit - 1), notifications: &notifications)
        // deep is 127 levels: once is 128 (fits), wrapped would be 129: null.
        expectEqual(try engine.get("w", keyPath: KeyPath("once")), .array([Self.nestedArrays(limit - 1)]))
        expectEqual(try engine.get("w", keyPath: KeyPath("wrapped")), .null)
    }
}
