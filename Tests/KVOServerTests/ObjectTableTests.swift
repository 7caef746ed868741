import Testing
import KVOJSON

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// `ObjectTable` holds objects packed or live with the same values: every kind of JSON round-trips
/// through the packed text exactly (number kinds and `-0.0` included), writes make an object live and
/// keep its size, the live objects stay bounded, and an engine restored from packed objects behaves as
/// one that built the same objects by writes.
@Suite("object table")
struct ObjectTableTests {
    /// Values whose kind `==` would not tell apart (`.int(1) == .double(1.0)`), `-0.0` and escapes.
    static let awkward: [String: JSONValue] = [
        "numbers": ["int": 1, "double": 1.0, "negZero": .double(-0.0), "zero": 0, "max": .int(.max), "min": .int(.min),
                    "big": 1e300, "tiny": .double(.leastNonzeroMagnitude), "half": -0.5, "large": .double(9.3e18)],
        "strings": ["escapes": "\"quoted\" \\ / \n\r\t\u{8}\u{C}\u{0}\u{1F}", "unicode": "ключ 😀 名前 \u{2028} \u{7F} é",
                    "combining": "e\u{301}", "": ""],
        "nested": ["a": ["b": ["c": [1, [2, [3, ["d": "deep"]]]]]], "empty": [:], "list": [], "nulls": [.null, false, true]],
        "empty": [:],
        "ключ 😀": ["\"key\"": ["\n": 1]],
    ]

    /// Same structure, same number kinds and the same bits of every double.
    static func identical(_ a: JSONValue, _ b: JSONValue) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case let (.bool(x), .bool(y)): return x == y
        case let (.int(x), .int(y)): return x == y
        case let (.double(x), .double(y)): return x.bitPattern == y.bitPattern
        case let (.string(x), .string(y)): return Array(x.utf8) == Array(y.utf8)
        case let (.array(x), .array(y)): return x.count == y.count && zip(x, y).allSatisfy(identical)
        case let (.object(x), .object(y)):
            return x.count == y.count && x.allSatisfy { key, value in y[key].map { identical(value, $0) } ?? false }
        default: return false
        }
    }

    /// Everything a notification says, numbers written as their kind (`1` and `1.0` differ).
    static func summary(_ notification: ChangeNotification) -> String {
        "\(notification.object) \(notification.keyPath) \(notification.reason) \(notification.rev) \(notification.kind) "
            + "\(notification.isPrior) \(JSONWriter.string(notification.old)) \(JSONWriter.string(notification.new)) "
            + "\(notification.indexes ?? [])"
    }

    @Test func aSlotIsOneWord() {
        expectEqual(MemoryLayout<ObjectSlot>.size, 8)
    }

    @Test func packedObjectsDecodeToIdenticalValues() {
        let table = ObjectTable(packing: Self.awkward)
        expectEqual(table.count, Self.awkward.count)
        for (id, value) in Self.awkward {
            #expect(!table.isLive(id))
            #expect(table.contains(id))
            let decoded = table[id]!
            #expect(Self.identical(decoded, value), "\(id)")
            expectEqual(table.size(of: id), JSONWriter.bytes(value).count)
            var text: [UInt8] = []
            #expect(table.writeCompactJSON(of: id, into: &text))
            expectEqual(text, JSONWriter.bytes(value))
        }
        #expect(table["missing"] == nil && !table.contains("missing") && table.size(of: "missing") == nil)
        expectEqual(table.storedBytes, Self.awkward.reduce(0) { $0 + $1.key.utf8.count + JSONWriter.bytes($1.value).count })
    }

    @Test func aWriteMakesAnObjectLiveAndKeepsItsSize() throws {
        var table = ObjectTable(packing: Self.awkward)
        let index = try #require(table.index(forKey: "numbers"))
        let old = table.modifyObject(at: index) { (value: inout JSONValue, sizeBefore: Int) -> (JSONValue?, growth: Int) in
            expectEqual(sizeBefore, JSONWriter.bytes(Self.awkward["numbers"]!).count)
            guard case var .object(members) = value else { return (nil, 0) }
            let old = members.updateValue(.double(-0.0), forKey: "int")
            value = .object(members)
            return (old, JSONWriter.encodedLength(of: .double(-0.0)) - JSONWriter.encodedLength(of: old!))
        }
        expectEqual(old.map { Self.identical($0, 1) }, true)
        #expect(table.isLive("numbers") && table.liveCount == 1)
        var expected = Self.awkward["numbers"]!.objectValue!
        expected["int"] = .double(-0.0)
        #expect(Self.identical(table["numbers"]!, .object(expected)))
        expectEqual(table.size(of: "numbers"), JSONWriter.bytes(.object(expected)).count)
        var text: [UInt8] = []
        #expect(table.writeCompactJSON(of: "numbers", into: &text))
        expectEqual(text, JSONWriter.bytes(.object(expected)))
        // Packed again, it reads the same.
        table.maximumLiveObjects = 0
        table.packExcessLive()  // passes once (written), then packs
        #expect(!table.isLive("numbers") && table.liveCount == 0)
        #expect(Self.identical(table["numbers"]!, .object(expected)))
        expectEqual(table.size(of: "numbers"), JSONWriter.bytes(.object(expected)).count)
    }

    @Test func aFailedWriteLeavesTheValueAndSize() throws {
        struct Refused: Error {}
        var table = ObjectTable(packing: ["o": ["v": 1]])
        let index = try #require(table.index(forKey: "o"))
        #expect(throws: Refused.self) {
            try table.modifyObject(at: index) { (_: inout JSONValue, _: Int) throws(Refused) -> (Void, growth: Int) in
                throw Refused()
            }
        }
        #expect(table["o"] == ["v": 1] && table.size(of: "o") == 7)
    }

    @Test func liveObjectsStayBoundedAndHotOnesStayLive() throws {
        var table = ObjectTable()
        table.maximumLiveObjects = 4
        for number in 0..<20 {
            table.insertLive("o\(number)", members: ["v": .int(Int64(number))], size: 7)
        }
        table.packExcessLive()
        expectEqual(table.liveCount, 4)
        // Keep writing "hot": it is passed over (written since the clock last saw it), others are packed.
        for round in 0..<200 {
            for id in ["hot", "o\(round % 20)"] {
                if !table.contains(id) { table.insertLive(id, members: ["v": 0], size: 7) }
                let index = try #require(table.index(forKey: id))
                table.modifyObject(at: index) { (value: inout JSONValue, _: Int) -> (Void, growth: Int) in
                    value = ["v": .int(Int64(round))]
                    return ((), 0)
                }
                table.packExcessLive()
                #expect(table.liveCount <= 4)
            }
            #expect(table.isLive("hot"))
        }
        for number in 0..<20 {
            let last = (0..<200).last { $0 % 20 == number }!
            expectEqual(table["o\(number)"], ["v": .int(Int64(last))])
        }
        // Deleting and creating again does not grow the clock without end.
        for round in 0..<10_000 {
            table.removeValue(forKey: "churn")
            table.insertLive("churn", members: ["v": .int(Int64(round))], size: 7)
        }
        expectEqual(table["churn"], ["v": 9_999])
        #expect(table.liveCount <= 5)
    }

    /// Equal objects, packed or live, compare equal; a differing value does not.
    @Test func tablesCompareByValue() throws {
        var live = ObjectTable()
        for (id, value) in Self.awkward { live.insertLive(id, members: value.objectValue!, size: JSONWriter.bytes(value).count) }
        expectEqual(live, ObjectTable(packing: Self.awkward))
        live.removeValue(forKey: "empty")
        live.insertLive("empty", members: ["x": 1], size: 7)
        #expect(live != ObjectTable(packing: Self.awkward))
    }

    /// An engine restored from packed objects answers, notifies and digests as one that wrote them.
    @Test func aRestoredEngineBehavesAsOneThatWroteItsObjects() throws {
        let written = KVOEngine()
        for id in Self.awkward.keys.sorted() { try written.create(id, Self.awkward[id]!.objectValue!) }
        // Restored as a store restores it: the values packed, each with its last-change revision.
        var table = ObjectTable(packing: Self.awkward)
        for id in Self.awkward.keys { table.setChangedRevision(id, written.changedRevision(of: id)!) }
        let restored = KVOEngine(restoring: PersistedState(objects: table, revision: written.revision))
        expectEqual(StateDigest.of(restored), StateDigest.of(written))
        expectEqual(restored.storedBytes, written.storedBytes)
        expectEqual(restored.objectIDs(), written.objectIDs())
        for engine in [written, restored] {
            for id in Self.awkward.keys {
                #expect(Self.identical(try engine.get(id, keyPath: nil), Self.awkward[id]!))
            }
            #expect(Self.identical(try engine.value("numbers", "negZero"), .double(-0.0)))
            #expect(Self.identical(try engine.value("nested", "a.b.c"), [1, [2, [3, ["d": "deep"]]]]))
        }
        // The same writes give the same notifications (old values included) and the same state.
        var outcomes: [[String]] = []
        for engine in [written, restored] {
            try engine.observe("numbers", "double", [.new, .old, .prior])
            try engine.observe("strings", "escapes")
            try engine.observe("nested", "a.b")
            var notifications = try engine.set("numbers", "double", 2)
            notifications += try engine.set("strings", "escapes", "x")
            notifications += try engine.set("nested", "a.b.e", .double(-0.0))
            notifications += try engine.mutate("nested", "list", .insert(indexes: [0], values: [[:]]))
            notifications += try engine.delete("empty")
            outcomes.append(notifications.map(Self.summary))
            #expect(notifications.contains { $0.keyPath == "double" && !$0.isPrior && Self.identical($0.old, .double(1.0)) })
            #expect(engine.objects.isLive("numbers"))
        }
        expectEqual(outcomes[0], outcomes[1])
        expectEqual(StateDigest.of(restored), StateDigest.of(written))
        expectEqual(restored.storedBytes, written.storedBytes)
        expectEqual(restored.objectIDs(), written.objectIDs())
    }

    /// Through the store: objects written by an engine, loaded packed, read back identically; a store
    /// whose text is not the writer's own (spaces, unsorted keys, escapes) loads to the same values.
    @Test func loadedObjectsArePackedAndIdentical() throws {
        let directory = TemporaryDirectory()
        let engine = KVOEngine(recordsCommitBatches: true)
        for id in Self.awkward.keys.sorted() { try engine.create(id, Self.awkward[id]!.objectValue!) }
        try engine.set("numbers", "int", 2)
        do {
            let store = try SQLiteStore(directory: directory.path, sync: .normal, historyLimit: 100, historyByteLimit: 1 << 20)
            try store.commit(engine.takeCommitBatch())
            store.close()
        }
        let store = try SQLiteStore(directory: directory.path, sync: .normal, historyLimit: 100, historyByteLimit: 1 << 20)
        defer { store.close() }
        let state = try store.load()
        expectEqual(state.objects.liveCount, 0)
        for id in Self.awkward.keys {
            #expect(Self.identical(state.objects[id]!, try engine.get(id, keyPath: nil)), "\(id)")
        }
        let restored = KVOEngine(restoring: state)
        expectEqual(StateDigest.of(restored), StateDigest.of(engine))
        expectEqual(restored.storedBytes, engine.storedBytes)
        expectEqual(restored.objectIDs(), engine.objectIDs())
    }

    /// The store returns ids in byte order; where that is not Swift's `String` order (a decomposed accent
    /// sorts by its base letter in bytes, by the composed character as a `String`), the load sorts them.
    @Test func idsOutOfStringOrderOnDiskAreSortedAtLoad() throws {
        let ids = ["a", "e\u{301}x", "é", "z", "ключ", "😀"]
        let bytesOrder = ids.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
        #expect(bytesOrder != ids.sorted(), "the fixture must disagree between the two orders")
        let directory = TemporaryDirectory()
        let engine = KVOEngine(recordsCommitBatches: true)
        for id in ids { try engine.create(id, ["v": .string(id)]) }
        do {
            let store = try SQLiteStore(directory: directory.path, sync: .normal, historyLimit: 100, historyByteLimit: 1 << 20)
            try store.commit(engine.takeCommitBatch())
            store.close()
        }
        let store = try SQLiteStore(directory: directory.path, sync: .normal, historyLimit: 100, historyByteLimit: 1 << 20)
        defer { store.close() }
        let restored = KVOEngine(restoring: try store.load())
        expectEqual(restored.objectIDs(), ids.sorted())
        expectEqual(Array(restored.objectIDs(after: "é")), ids.sorted().filter { $0 > "é" })
        for id in ids { #expect(try restored.value(id, "v") == .string(id)) }
    }
}
