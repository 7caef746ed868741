import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// History entries restored packed (`HistoryEntry` holding its change's JSON text): they decode to the
/// very change that was stored, count the same bytes for history's limits, and tell creations and
/// deletions apart without decoding; a restored engine replays `sinceRev` exactly as the engine that
/// recorded the writes did.
@Suite struct PackedHistoryEntryTests {
    private typealias F = StorageFixtures

    @Test func theEstimateFromCanonicalTextIsTheValuesEstimate() throws {
        var random = SplitMix64(state: 13)
        for _ in 0..<5_000 {
            let object = CanonicalObjectScanTests.randomObject(&random)
            let text = JSONWriter.bytes(object)
            let estimate = text.withUnsafeBufferPointer { JSONValue.estimatedSize(ofCanonicalObject: $0) }
            expectEqual(estimate, object.estimatedSize, "\(JSONWriter.string(object))")
        }
        let notProven = Array("{\"a\":1.5}".utf8)
        expectEqual(notProven.withUnsafeBufferPointer { JSONValue.estimatedSize(ofCanonicalObject: $0) }, nil)
    }

    /// Every kind of change, packed from its value and restored from a store, decodes to itself and keeps
    /// the decoded change's estimated size and kind.
    @Test func packedEntriesDecodeToTheSameChangeAndSize() throws {
        let changes: [RecordedChange] = [
            .created(["date": "2026-11-20", "address": ["city": "Oslo"], "n": .int(-12), "t": true, "x": .null]),
            .created([:]),
            .set(path: ["address", "zip"], old: .none, new: "0150"),
            .set(path: ["address", "zip"], old: .some(.null), new: .null),
            .set(path: ["date"], old: "a \"quoted\"\n\ttext", new: ["nested": [1, 2.5, "ü"]]),
            .set(path: ["list", "0", "ключ 😀"], old: .int(.min), new: .double(-0.0)),
            .array(ArrayChangeRecord(path: ["items"], kind: .insertion, indexes: [1, 2], old: [], new: ["milk", 1e300])),
            .array(ArrayChangeRecord(path: ["items"], kind: .removal, indexes: [0], old: [["x": 1]], new: [])),
            .array(ArrayChangeRecord(path: ["items"], kind: .replacement, indexes: [0, 2], old: ["a", "c"], new: ["A", "C"])),
            .deleted(["date": ["nested": [1, 2.5, "ü"]], "address": ["city": "Oslo", "zip": .null]]),
            .deleted(["name": "object-1", "n": 1, "tags": ["a", "b"]]),
            .expired(["user": "ada", "seen": ["at": 1.5e12]]),
            .expired([:]),
        ]
        let entries = changes.enumerated().map { HistoryEntry(rev: UInt64($0.offset + 1), object: "o", change: $0.element) }
        for entry in entries {
            let packed = HistoryEntry(rev: entry.rev, object: entry.object, packing: entry.change)
            #expect(packed.isPacked && !entry.isPacked)
            expectEqual(packed, entry)
            expectEqual(packed.changeSize, entry.change.estimatedSize)
            #expect(packed.isCreation == entry.isCreation && packed.isDeletion == entry.isDeletion)
            expectEqual(packed.isExpiry, entry.isExpiry)
        }
        expectEqual(entries.map(\.isCreation), changes.map { if case .created = $0 { true } else { false } })
        expectEqual(entries.map(\.isDeletion), changes.map { $0.deletedValue != nil })
        expectEqual(entries.map(\.isExpiry), changes.map { if case .expired = $0 { true } else { false } })

        let directory = TemporaryDirectory()
        let store = try open(directory)
        try store.commit(CommitBatch(revision: UInt64(entries.count), entries: entries, objects: ["o": .deleted]))
        let restored = try store.load().history
        store.close()
        expectEqual(restored, entries)
        #expect(restored.allSatisfy { $0.isPacked })
        expectEqual(restored.map(\.changeSize), entries.map { $0.change.estimatedSize })
        expectEqual(restored.map(\.isCreation), entries.map(\.isCreation))
        expectEqual(restored.map(\.isDeletion), entries.map(\.isDeletion))
        expectEqual(restored.map(\.isExpiry), entries.map(\.isExpiry))
    }

    /// Rows the loader's scan does not prove canonical (white space, keys out of order, a double) are
    /// decoded, checked and packed as the writer writes them; they come back as the same change.
    @Test func nonCanonicalRowsAreDecodedAndPackedAgain() throws {
        let directory = TemporaryDirectory()
        try seed(directory, [F.entry(1, "a", ["b": 1, "a": 2]), F.entry(2, "a", ["v": 1.5]), F.entry(3, "a", nil)])
        try tamper(directory, "UPDATE history SET change = '{ \"created\" : {\"b\":1, \"a\":2} }' WHERE rev = 1")
        try tamper(directory, "UPDATE history SET change = '{\"deleted\":{\"x\":\"\\u00e9\"}}' WHERE rev = 3")
        let store = try open(directory)
        let history = try store.load().history
        store.close()
        expectEqual(history.map(\.change), [.created(["a": 2, "b": 1]), .created(["v": 1.5]), .deleted(["x": "é"])])
        #expect(history.allSatisfy { $0.isPacked })
        expectEqual(history.map(\.changeSize), history.map { $0.change.estimatedSize })
        expectEqual(history.map(\.isCreation), [true, true, false])
        expectEqual(history.map(\.isDeletion), [false, false, true])
    }

    /// A corrupt row is still refused at load, naming it, whichever way the loader reads it.
    @Test func corruptRowsAreRefusedAtLoad() throws {
        let cases: [(String, String)] = [
            ("{\"created\":{\"v\":1}", "invalid JSON"),                                      // cut short
            ("{\"created\":{\"v\":1}}}", "invalid JSON"),                                    // one brace too many
            ("{\"created\":{\"v\":1},\"x\":2}", "the change is not an object with one member"),
            ("{\"created\":{}}{\"x\":{}}", "invalid JSON"),
            ("{\"destroyed\":{\"v\":1}}", "unknown change 'destroyed'"),
            ("{\"set\":{\"path\":[\"v\"]}}", "'set' has no 'new'"),
            ("[]", "the change is not an object with one member"),
        ]
        for (text, reason) in cases {
            let directory = TemporaryDirectory()
            try seed(directory, [F.entry(1, "a", ["v": 1]), F.entry(2, "b", ["v": 2])])
            let quoted = text.replacingOccurrences(of: "'", with: "''")
            try tamper(directory, "UPDATE history SET change = '\(quoted)' WHERE rev = 2")
            let store = try open(directory)
            let error = #expect(throws: StorageError.self, "\(text)") { _ = try store.load() }
            guard case let .corrupt(row, message) = error else {
                Issue.record("expected a corrupt-row error for \(text), got \(String(describing: error))")
                continue
            }
            expectEqual(row, "history rev 2", "\(text)")
            #expect(message.hasPrefix(reason), "\(text): \(message)")
        }
    }

    /// History's byte and row accounting is the same for restored (packed) entries as for the recorded ones,
    /// so the same limits drop the same entries; and every `sinceRev` replays the same notifications.
    @Test func aRestoredEngineCountsAndReplaysHistoryAsTheRecordingOneDid() throws {
        let directory = TemporaryDirectory()
        let store = try open(directory)
        let engine = KVOEngine(historyLimit: 1000, historyByteLimit: 1 << 30, recordsCommitBatches: true)
        try engine.create("a1", ["city": "Oslo", "zip": 1])
        try engine.create("a2", ["city": "Paris \"centre\"", "zip": 2.5])
        try engine.create("p", ["address": .reference(to: "a1"), "items": [["price": 1]], "n": 0, "t": true])
        try engine.set("p", "n", 1)
        try engine.set("p", "t", .null)
        try engine.set("p", "address", .reference(to: "a2"))
        try engine.mutate("p", "items", .insert(indexes: nil, values: [["price": 2], ["price": 3]]))
        try engine.mutate("p", "items", .remove(indexes: [0]))
        try engine.set("p", "items.0.price", 7)
        try engine.set("a2", "city", "Rome ü 😀")
        try engine.delete("a2")
        try engine.create("a2", ["city": "Lyon"])
        try engine.set("p", "extra", ["nested": [1, 2, ["deep": false]]])
        try store.commit(engine.takeCommitBatch())
        let restored = KVOEngine(restoring: try store.load(), historyLimit: 1000, historyByteLimit: 1 << 30)
        store.close()
        // Restored entries count as they did when restored decoded (each change's estimated size; the
        // recording engine counted its sets by their values' encoded lengths, as before), so the same
        // byte limit keeps the same entries.
        for byteLimit in [1 << 30, restored.historyBytes * 2 / 3, 1] {
            let packed = try reload(directory)
            var decoded = packed
            decoded.history = packed.history.map { HistoryEntry(rev: $0.rev, object: $0.object, change: $0.change) }
            #expect(packed.history.allSatisfy { $0.isPacked } && !decoded.history.contains { $0.isPacked })
            let fromPacked = KVOEngine(restoring: packed, historyLimit: 1000, historyByteLimit: byteLimit)
            let fromDecoded = KVOEngine(restoring: decoded, historyLimit: 1000, historyByteLimit: byteLimit)
            expectEqual(fromPacked.historyCount, fromDecoded.historyCount, "\(byteLimit)")
            expectEqual(fromPacked.historyBytes, fromDecoded.historyBytes, "\(byteLimit)")
            expectEqual(fromPacked.history.oldestRevision, fromDecoded.history.oldestRevision, "\(byteLimit)")
            #expect(byteLimit > 1 || fromPacked.historyCount == 1, "the newest entry is kept alone")
        }
        expectEqual(restored.historyCount, engine.historyCount)

        let keyPaths = ["n", "t", "address.city", "address", "items", "items.@sum.price", "items.price", "extra.nested"]
        for since in 0..<engine.revision {
            for keyPath in keyPaths {
                #expect(try replay(engine, "p", keyPath, since: since) == replay(restored, "p", keyPath, since: since),
                        "\(keyPath) since \(since)")
            }
            #expect(try replay(engine, "a2", "city", since: since) == replay(restored, "a2", "city", since: since))
            for keyPath in [nil, "city"] as [String?] {
                expectEqual(replayPattern(engine, keyPath, since: since), replayPattern(restored, keyPath, since: since))
            }
        }
    }

    // MARK: - Helpers

    private func open(_ directory: TemporaryDirectory) throws -> SQLiteStore {
        try SQLiteStore(directory: directory.path, sync: .normal, historyLimit: 1000, historyByteLimit: 1 << 30)
    }

    private func reload(_ directory: TemporaryDirectory) throws -> PersistedState {
        let store = try open(directory)
        defer { store.close() }
        return try store.load()
    }

    private func seed(_ directory: TemporaryDirectory, _ entries: [FixtureEntry]) throws {
        let store = try open(directory)
        defer { store.close() }
        try store.commit(F.batch(entries))
    }

    private func tamper(_ directory: TemporaryDirectory, _ sql: String) throws {
        let database = try SQLiteDatabase(path: directory.appending("kvod.sqlite3"))
        defer { database.close() }
        try database.exec(sql)
    }

    /// The notifications `observe` with `sinceRev` makes, rendered without their recipients; the observation
    /// is ended again so that the engine stays as it was.
    private func replay(_ engine: KVOEngine, _ object: String, _ keyPath: String, since rev: UInt64) throws -> [String] {
        var notifications: [ChangeNotification] = []
        let connection = ConnectionID(77)
        let sub = try engine.observe(object, keyPath: KeyPath(keyPath), options: [.new, .old, .prior],
                                     connection: connection, sinceRev: rev, notifications: &notifications)
        _ = engine.unobserve(sub, connection: connection)
        return notifications.map(render)
    }

    private func replayPattern(_ engine: KVOEngine, _ keyPath: String?, since rev: UInt64) -> [String] {
        var notifications: [ChangeNotification] = []
        let connection = ConnectionID(78)
        let sub = try? engine.observe(pattern: try! ObjectIDPattern("a*"), keyPath: keyPath.map { try! KeyPath($0) },
                                      options: [.new, .old, .prior], connection: connection, sinceRev: rev,
                                      notifications: &notifications)
        if let sub { _ = engine.unobserve(sub, connection: connection) }
        return notifications.map(render)
    }

    private func render(_ notification: ChangeNotification) -> String {
        "\(notification.object) \(notification.keyPath) \(notification.rev) \(notification.reason) \(notification.kind) "
            + "prior=\(notification.isPrior) \(notification.indexes ?? []) old=\(JSONWriter.string(notification.old)) "
            + "new=\(JSONWriter.string(notification.new))"
    }
}
