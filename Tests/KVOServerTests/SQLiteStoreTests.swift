import Foundation
import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// `SQLiteStore` against real SQLite files in temporary directories: what is committed comes back
/// after a reopen, exactly, and history is trimmed to its limits.
@Suite struct SQLiteStoreTests {
    typealias F = StorageFixtures

    func open(_ directory: TemporaryDirectory, sync: SyncMode = .normal, historyLimit: Int = 1000,
                      historyByteLimit: Int = 1 << 30) throws -> SQLiteStore {
        try SQLiteStore(directory: directory.path, sync: sync, historyLimit: historyLimit,
                            historyByteLimit: historyByteLimit)
    }

    /// Opens the directory again (after closing `store`) and loads it.
    func reload(_ directory: TemporaryDirectory, closing store: SQLiteStore? = nil) throws -> PersistedState {
        store?.close()
        let reopened = try open(directory)
        defer { reopened.close() }
        return try reopened.load()
    }

    // MARK: - Objects and revision

    @Test func aNewDatabaseIsEmptyAtRevisionZero() throws {
        let directory = TemporaryDirectory()
        let store = try open(directory)
        let state = try store.load()
        #expect(state.objects.isEmpty)
        expectEqual(state.revision, 0)
        #expect(state.history.isEmpty)
        expectEqual(store.databasePath, directory.path + "/kvod.sqlite3")
    }

    @Test func objectsRoundTripExactly() throws {
        let directory = TemporaryDirectory()
        let big = String(repeating: "0123456789abcdef", count: 1 << 16)  // 1 MiB
        let objects: [String: JSONValue] = [
            "plain": ["date": "2026-11-20", "n": 3, "ratio": 0.25, "ok": true, "none": .null],
            "nested": ["a": ["b": ["c": [1, [2, [3, ["d": "deep"]]]]]], "empty": [:], "list": []],
            "unicode ключ 😀": ["名前": "値 \u{2028} \u{0} \"quoted\" \\ /", "emoji": "👩‍👩‍👧"],
            "numbers": ["max": .int(.max), "min": .int(.min), "tiny": .double(.leastNonzeroMagnitude), "big": 1e300, "neg": -0.5],
            "big": ["text": .string(big), "items": .array((0..<10_000).map { ["i": .int(Int64($0))] })],
            "": ["empty id": true],
        ]
        let store = try open(directory)
        var rev: UInt64 = 0
        let entries = objects.keys.sorted().map { id -> FixtureEntry in
            rev += 1
            return F.entry(rev, id, objects[id]!)
        }
        try store.commit(F.batch(entries))
        let state = try reload(directory, closing: store)
        expectEqual(state.objects, ObjectTable(packing: objects))
        expectEqual(state.revision, rev)
        // Numbers keep their kind: integers stay integers, doubles stay doubles.
        expectEqual(JSONWriter.string(state.objects["numbers"]!), JSONWriter.string(objects["numbers"]!))
        expectEqual(state.objects["big"]?["text"]?.stringValue?.utf8.count, 1 << 20)
    }

    @Test func aNilValueDeletesTheObject() throws {
        let directory = TemporaryDirectory()
        let store = try open(directory)
        try store.commit(F.batch([F.entry(1, "a", ["v": 1]), F.entry(2, "b", ["v": 2])]))
        try store.commit(F.batch([F.entry(3, "a", nil)]))
        // Deleting an object that was never stored is not an error.
        try store.commit(F.batch([F.entry(4, "never", nil)]))
        let state = try reload(directory, closing: store)
        expectEqual(state.objects, ["b": ["v": 2]])
        expectEqual(state.revision, 4)
    }

    @Test func theLastEntryOfEachObjectInABatchWins() throws {
        let directory = TemporaryDirectory()
        let store = try open(directory)
        try store.commit(F.batch([F.entry(1, "kept", ["v": 0]), F.entry(2, "gone", ["v": 0])]))
        let changesBefore = Int(try store.queryText("SELECT total_changes()"))!
        try store.commit(F.batch([
            F.entry(3, "kept", ["v": 1]),
            F.entry(4, "gone", nil),
            F.entry(5, "kept", ["v": 2]),
            F.entry(6, "reborn", ["v": 1]),
            F.entry(7, "reborn", nil),
            F.entry(8, "reborn", ["v": 3]),
            F.entry(9, "transient", ["v": 1]),
            F.entry(10, "transient", nil),
        ]))
        // Each object is written once: "kept" and "reborn" upserted, "gone" deleted ("transient" was
        // never stored, so deleting it changes no row); then 8 history rows and the revision.
        expectEqual(Int(try store.queryText("SELECT total_changes()"))! - changesBefore, 3 + 8 + 1)
        let state = try reload(directory, closing: store)
        expectEqual(state.objects, ["kept": ["v": 2], "reborn": ["v": 3]])
        expectEqual(state.revision, 10)
        // Every entry is still in history, in order.
        expectEqual(state.history.map(\.rev), Array(1...10))
    }

    @Test func theRevisionSurvivesReopeningAndAnEmptyBatchCanMoveIt() throws {
        let directory = TemporaryDirectory()
        do {
            let store = try open(directory)
            try store.commit(F.batch([F.entry(41, "a", ["v": 1])]))
            store.close()
        }
        expectEqual(try reload(directory).revision, 41)
        let store = try open(directory)
        try store.commit(CommitBatch(revision: 42, entries: [], objects: [:]))
        expectEqual(try reload(directory, closing: store).revision, 42)
    }

    @Test func anEmptyBatchAtTheStoredRevisionWritesNothing() throws {
        let directory = TemporaryDirectory()
        let store = try open(directory)
        try store.commit(F.batch([F.entry(1, "a", ["v": 1])]))
        // total_changes(): rows this connection has inserted, updated or deleted so far.
        let changes = try store.queryText("SELECT total_changes()")
        try store.commit(CommitBatch(revision: 1, entries: [], objects: [:]))
        expectEqual(try store.queryText("SELECT total_changes()"), changes)
        try store.commit(CommitBatch(revision: 2, entries: [], objects: [:]))
        expectEqual(try store.queryText("SELECT total_changes()"), String(Int(changes)! + 1))
        expectEqual(try store.load().revision, 2)
    }

    // MARK: - History

    @Test func historyComesBackOldestFirstWithArrayChanges() throws {
        let directory = TemporaryDirectory()
        let insertion = ArrayChangeRecord(path: ["items"], kind: .insertion, indexes: [1, 2], old: [], new: ["milk", "eggs"])
        let removal = ArrayChangeRecord(path: ["lists", "0", "items"], kind: .removal, indexes: [0], old: [["x": 1]], new: [])
        let replacement = ArrayChangeRecord(path: ["items"], kind: .replacement, indexes: [0], old: ["bread"], new: ["rye"])
        let entries = [
            F.entry(1, "todo", ["items": ["bread"]]),
            F.entry(2, "todo", ["items": ["bread", "milk", "eggs"]], change: insertion),
            F.entry(3, "nested", ["lists": [["items": []]]], change: removal),
            F.entry(4, "todo", ["items": ["rye", "milk", "eggs"]], change: replacement),
            F.entry(5, "nested", nil),
        ]
        let store = try open(directory)
        try store.commit(F.batch(Array(entries[0..<2])))
        try store.commit(F.batch(Array(entries[2...])))
        let state = try reload(directory, closing: store)
        expectEqual(state.history, entries.map(\.entry))
        expectEqual(state.history[4].change, .deleted(.object([:])), "a delete comes back as a deletion")
        expectEqual(state.history[1].change, .array(insertion))
    }

    @Test func everyKindOfRecordedChangeRoundTrips() throws {
        let directory = TemporaryDirectory()
        let changes: [RecordedChange] = [
            .created(["date": "2026-11-20", "address": ["city": "Oslo"]]),
            // A key that did not exist (old nil) is not the same as a key that held JSON null.
            .set(path: ["address", "zip"], old: .none, new: "0150"),
            .set(path: ["address", "zip"], old: .some(.null), new: .null),
            .set(path: ["date"], old: "2026-11-20", new: ["nested": [1, 2.5, "ü"]]),
            .set(path: ["list", "0", "ключ 😀"], old: .int(.min), new: .double(-0.0)),
            .array(ArrayChangeRecord(path: ["items"], kind: .replacement, indexes: [0, 2], old: ["a", "c"], new: ["A", "C"])),
            .deleted(["date": ["nested": [1, 2.5, "ü"]], "address": ["city": "Oslo", "zip": .null]]),
        ]
        let entries = changes.enumerated().map { HistoryEntry(rev: UInt64($0.offset + 1), object: "o", change: $0.element) }
        let store = try open(directory)
        try store.commit(CommitBatch(revision: UInt64(entries.count), entries: entries, objects: ["o": .deleted]))
        let state = try reload(directory, closing: store)
        expectEqual(state.history, entries)
        #expect(state.objects.isEmpty)
        guard case let .set(_, absent, _) = state.history[1].change, case let .set(_, null, _) = state.history[2].change else {
            Issue.record("expected two sets, got \(state.history[1].change) and \(state.history[2].change)")
            return
        }
        expectEqual(absent, .none)
        expectEqual(null, .some(.null))
    }

    @Test func historyIsTrimmedToTheNewestRowsByCount() throws {
        let directory = TemporaryDirectory()
        let store = try open(directory, historyLimit: 5)
        var rev: UInt64 = 0
        for batchSize in [3, 1, 4, 4] {
            let entries = (0..<batchSize).map { _ -> FixtureEntry in
                rev += 1
                return F.entry(rev, "o\(rev % 3)", ["v": .int(Int64(rev))])
            }
            try store.commit(F.batch(entries))
            expectEqual(store.historyRowCount, min(Int(rev), 5))
        }
        expectEqual(try store.load().history.map(\.rev), [8, 9, 10, 11, 12])
        store.close()
        // A smaller limit at the next start trims at once.
        let smaller = try open(directory, historyLimit: 2)
        expectEqual(try smaller.load().history.map(\.rev), [11, 12])
        expectEqual(smaller.historyRowCount, 2)
        // Objects are never trimmed.
        expectEqual(try smaller.load().objects.count, 3)
    }

    @Test func historyIsTrimmedByBytes() throws {
        let directory = TemporaryDirectory()
        let entries = (1...10).map { F.entry(UInt64($0), "o", ["text": .string(String(repeating: "x", count: 100))]) }
        let rowBytes = F.rowBytes(entries[0])
        #expect(rowBytes > 100)
        // Room for three rows and a half: three are kept.
        let store = try open(directory, historyLimit: 1000, historyByteLimit: rowBytes * 7 / 2)
        try store.commit(F.batch(Array(entries[0..<4])))
        expectEqual(store.historyRowCount, 3)
        for entry in entries[4...] { try store.commit(F.batch([entry])) }
        expectEqual(store.historyByteTotal, 3 * rowBytes)
        let state = try store.load()
        expectEqual(state.history.map(\.rev), [8, 9, 10])
        store.close()
        // The running total is rebuilt from disk on open.
        let reopened = try open(directory, historyLimit: 1000, historyByteLimit: rowBytes * 7 / 2)
        expectEqual(reopened.historyByteTotal, 3 * rowBytes)
    }

    @Test func aRowLargerThanTheByteCapIsKeptAlone() throws {
        let directory = TemporaryDirectory()
        let store = try open(directory, historyLimit: 1000, historyByteLimit: 50)
        try store.commit(F.batch([F.entry(1, "a", ["v": 1]), F.entry(2, "a", ["v": 2])]))
        expectEqual(store.historyRowCount, 2)
        let large = F.entry(3, "a", ["text": .string(String(repeating: "y", count: 200))])
        try store.commit(F.batch([large]))
        expectEqual(try store.load().history, [large.entry])
        // A change record counts too.
        let change = ArrayChangeRecord(path: ["l"], kind: .insertion, indexes: [0], old: [], new: ["z"])
        let withChange = F.entry(4, "a", ["l": ["z"]], change: change)
        try store.commit(F.batch([withChange]))
        expectEqual(store.historyByteTotal, F.rowBytes(withChange))
        #expect(F.rowBytes(withChange) > JSONWriter.bytes(withChange.value!).count)
    }

    @Test func aZeroHistoryLimitKeepsNoHistory() throws {
        let directory = TemporaryDirectory()
        let store = try open(directory, historyLimit: 0)
        try store.commit(F.batch([F.entry(1, "a", ["v": 1]), F.entry(2, "b", ["v": 2])]))
        let state = try store.load()
        #expect(state.history.isEmpty)
        expectEqual(state.objects.count, 2)
        expectEqual(state.revision, 2)
    }

    @Test func trimmingManyRowsKeepsTheRunningTotalRight() throws {
        // 10,000 rows through a 10-row window: the ledger compacts its dropped rows several times.
        let directory = TemporaryDirectory()
        let store = try open(directory, sync: .off, historyLimit: 10)
        var rev: UInt64 = 0
        for _ in 0..<100 {
            let entries = (0..<100).map { _ -> FixtureEntry in
                rev += 1
                return F.entry(rev, "o\(rev % 7)", ["v": .int(Int64(rev)), "pad": .string(String(repeating: "p", count: Int(rev % 13)))])
            }
            try store.commit(F.batch(entries))
        }
        let state = try store.load()
        expectEqual(state.history.map(\.rev), Array(9991...10000))
        expectEqual(store.historyByteTotal, state.history.reduce(0) { $0 + F.rowBytes($1) })
        store.close()
        let reopened = try open(directory, historyLimit: 10)
        expectEqual(reopened.historyByteTotal, state.history.reduce(0) { $0 + F.rowBytes($1) })
    }

    // MARK: - Atomicity

    @Test func aFailingBatchStoresNothingAndTheStoreCarriesOn() throws {
        let directory = TemporaryDirectory()
        let store = try open(directory, historyLimit: 3)
        try store.commit(F.batch([F.entry(1, "a", ["v": 1]), F.entry(2, "b", ["v": 1])]))
        let bytes = store.historyByteTotal
        // Revision 2 is already in history: the insert fails after "a" was rewritten and "c" created.
        #expect(throws: StorageError.self) {
            try store.commit(F.batch([F.entry(3, "a", ["v": 99]), F.entry(4, "c", ["v": 1]), F.entry(2, "d", ["v": 1])]))
        }
        expectEqual(store.historyRowCount, 2)
        expectEqual(store.historyByteTotal, bytes)
        let state = try store.load()
        expectEqual(state.objects, ["a": ["v": 1], "b": ["v": 1]])
        expectEqual(state.revision, 2)
        // The next batch commits normally and trims with the right counts.
        try store.commit(F.batch([F.entry(3, "a", ["v": 3]), F.entry(4, "c", ["v": 4])]))
        let after = try reload(directory, closing: store)
        expectEqual(after.objects, ["a": ["v": 3], "b": ["v": 1], "c": ["v": 4]])
        expectEqual(after.history.map(\.rev), [2, 3, 4])
        expectEqual(after.revision, 4)
    }

    // MARK: - Classes and bindings

    static let labColor: JSONValue = [
        "name": "LabColor",
        "properties": ["l": ["type": "number", "min": 0, "max": 100], "a": ["type": "number"], "b": ["type": "number"]],
        "computed": ["chroma": "sqrt($a * $a + $b * $b)"],
    ]
    static let bindAtoB: JSONValue = [
        "kind": "bind", "from": ["object": "a", "keyPath": "x"], "to": ["object": "b", "keyPath": "y"],
        "filter": "$value > 0", "convert": "$value * 2",
    ]
    private static let combineToC: JSONValue = [
        "kind": "combineLatest", "sources": [["object": "a", "keyPath": "x"], ["object": "b", "keyPath": "y"]],
        "to": ["object": "c", "keyPath": "z"], "reduce": "$0 + $1",
    ]

    @Test func classesAndBindingsRoundTripAcrossReopening() throws {
        let directory = TemporaryDirectory()
        let store = try open(directory)
        var batch = F.batch([F.entry(1, "a", ["x": 1])])
        batch.classes = ["LabColor": Self.labColor, "Empty ключ": ["name": "Empty ключ", "properties": [:]]]
        batch.bindings = [7: Self.bindAtoB, 8: Self.combineToC]
        batch.lastBindingID = 8
        try store.commit(batch)
        // Redefining a class replaces its definition.
        let relaxed: JSONValue = ["name": "LabColor", "properties": ["l": ["type": "number"]]]
        try store.commit(CommitBatch(revision: 1, entries: [], objects: [:], classes: ["LabColor": relaxed]))
        let state = try reload(directory, closing: store)
        expectEqual(state.classes, ["LabColor": relaxed, "Empty ключ": ["name": "Empty ключ", "properties": [:]]])
        expectEqual(state.bindings, [7: Self.bindAtoB, 8: Self.combineToC])
        expectEqual(state.lastBindingID, 8)
        expectEqual(state.objects, ["a": ["x": 1]])
        expectEqual(state.revision, 1)
        // Stored as compact JSON text, like objects.
        expectEqual(try peek(directory, "SELECT definition FROM bindings WHERE id = 8"), JSONWriter.string(Self.combineToC))
    }

    @Test func aRemovedBindingDeletesItsRow() throws {
        let directory = TemporaryDirectory()
        let store = try open(directory)
        try store.commit(CommitBatch(revision: 0, entries: [], objects: [:], bindings: [1: Self.bindAtoB, 2: Self.combineToC],
                                     lastBindingID: 2))
        var removal = CommitBatch(revision: 0, entries: [], objects: [:])
        // Assigning nil through the subscript would drop the key and record nothing.
        removal.bindings[1] = nil
        #expect(removal.isEmpty)
        removal.bindings.updateValue(nil, forKey: 1)
        // Removing a binding that was never stored is not an error.
        removal.bindings[99] = .some(.none)
        #expect(!removal.isEmpty)
        try store.commit(removal)
        expectEqual(try store.queryText("SELECT group_concat(id) FROM bindings"), "2")
        let state = try reload(directory, closing: store)
        expectEqual(state.bindings, [2: Self.combineToC])
        expectEqual(state.lastBindingID, 2)
    }

    @Test func theLastBindingIDSurvivesAndNeverGoesDown() throws {
        let directory = TemporaryDirectory()
        do {
            let store = try open(directory)
            // Bindings 1...5 created and removed again: no row is left, only the counter.
            try store.commit(CommitBatch(revision: 0, entries: [], objects: [:], bindings: [5: .none], lastBindingID: 5))
            store.close()
        }
        expectEqual(try reload(directory).lastBindingID, 5)
        let store = try open(directory)
        // A lower counter (a batch that handed out no id says 0) leaves the stored one alone.
        try store.commit(CommitBatch(revision: 1, entries: [F.entry(1, "a", ["v": 1]).entry], objects: [:], lastBindingID: 3))
        expectEqual(try store.load().lastBindingID, 5)
        // A counter alone, with nothing else in the batch, is still written.
        let changes = Int(try store.queryText("SELECT total_changes()"))!
        try store.commit(CommitBatch(revision: 1, entries: [], objects: [:], lastBindingID: 6))
        expectEqual(Int(try store.queryText("SELECT total_changes()"))!, changes + 1)
        expectEqual(try reload(directory, closing: store).lastBindingID, 6)
    }

    @Test func theLastBindingIDIsNeverBelowALiveBinding() throws {
        let directory = TemporaryDirectory()
        let store = try open(directory)
        try store.commit(CommitBatch(revision: 0, entries: [], objects: [:], bindings: [9: Self.bindAtoB], lastBindingID: 4))
        expectEqual(try reload(directory, closing: store).lastBindingID, 9)
    }

    @Test func aBatchWithOnlyAClassIsWrittenWithoutMovingTheRevision() throws {
        let directory = TemporaryDirectory()
        let store = try open(directory)
        try store.commit(F.batch([F.entry(1, "a", ["v": 1]), F.entry(2, "b", ["v": 2])]))
        let batch = CommitBatch(revision: 2, entries: [], objects: [:], classes: ["LabColor": Self.labColor])
        #expect(!batch.isEmpty)
        let changes = Int(try store.queryText("SELECT total_changes()"))!
        try store.commit(batch)
        // One row: the class. Neither the revision nor history is rewritten.
        expectEqual(Int(try store.queryText("SELECT total_changes()"))!, changes + 1)
        let state = try reload(directory, closing: store)
        expectEqual(state.classes, ["LabColor": Self.labColor])
        expectEqual(state.revision, 2)
        expectEqual(state.history.map(\.rev), [1, 2])
        expectEqual(state.objects, ["a": ["v": 1], "b": ["v": 2]])
    }

    @Test func aFailingBatchStoresNoClassBindingOrObject() throws {
        let directory = TemporaryDirectory()
        let store = try open(directory)
        var first = F.batch([F.entry(1, "a", ["v": 1]), F.entry(2, "b", ["v": 1])])
        first.bindings = [1: Self.bindAtoB]
        first.lastBindingID = 1
        try store.commit(first)
        // Revision 2 is already in history: the history insert fails after the objects, the class and
        // the bindings of the batch were written.
        var failing = F.batch([F.entry(3, "a", ["v": 99]), F.entry(2, "c", ["v": 1])])
        failing.classes = ["LabColor": Self.labColor]
        failing.bindings = [1: .none, 2: Self.combineToC]
        failing.lastBindingID = 2
        #expect(throws: StorageError.self) { try store.commit(failing) }
        let state = try store.load()
        expectEqual(state.objects, ["a": ["v": 1], "b": ["v": 1]])
        #expect(state.classes.isEmpty)
        expectEqual(state.bindings, [1: Self.bindAtoB])
        expectEqual(state.lastBindingID, 1)
        expectEqual(state.revision, 2)
        // The counter was not raised in memory either: the same counter commits later.
        try store.commit(CommitBatch(revision: 2, entries: [], objects: [:], lastBindingID: 2))
        expectEqual(try reload(directory, closing: store).lastBindingID, 2)
    }

    @Test func aVersionOneDatabaseIsMigratedInPlace() throws {
        let directory = TemporaryDirectory()
        let created = F.entry(1, "a", ["v": 1])
        let set = HistoryEntry(rev: 2, object: "a", change: .set(path: ["v"], old: 1, new: 2))
        // What the version-1 store wrote (its schema, verbatim), with two revisions in it.
        try tamper(directory, """
            CREATE TABLE objects(id TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
            CREATE TABLE meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID;
            CREATE TABLE history(rev INTEGER PRIMARY KEY, object TEXT NOT NULL, change TEXT NOT NULL,
                                 bytes INTEGER NOT NULL);
            INSERT INTO meta(key, value) VALUES('schema_version', 1), ('revision', 2);
            INSERT INTO objects(id, value) VALUES('a', '{"v":2}');
            INSERT INTO history(rev, object, change, bytes) VALUES
                (1, 'a', '\(JSONWriter.string(created.entry.change.json))', 9),
                (2, 'a', '\(JSONWriter.string(set.change.json))', 9);
            """)
        let store = try open(directory)
        expectEqual(try store.queryText("SELECT value FROM meta WHERE key = 'schema_version'"), "\(SQLiteStore.schemaVersion)")
        let migrated = try store.load()
        expectEqual(migrated.objects, ["a": ["v": 2]])
        expectEqual(migrated.objects.changedRevision(of: "a"), 0, "an older row's last change is unknown")
        expectEqual(migrated.revision, 2)
        expectEqual(migrated.history, [created.entry, set])
        #expect(migrated.classes.isEmpty)
        #expect(migrated.bindings.isEmpty)
        expectEqual(migrated.lastBindingID, 0)
        var batch = CommitBatch(revision: 3, entries: [HistoryEntry(rev: 3, object: "a", change: .set(path: ["v"], old: 2, new: 3))],
                                objects: ["a": .present(["v": 3])])
        batch.classes = ["LabColor": Self.labColor]
        batch.bindings = [1: Self.bindAtoB]
        batch.lastBindingID = 1
        try store.commit(batch)
        let state = try reload(directory, closing: store)
        expectEqual(state.objects, ["a": ["v": 3]])
        expectEqual(state.objects.changedRevision(of: "a"), 3, "written again: known")
        expectEqual(state.history.map(\.rev), [1, 2, 3])
        expectEqual(try peek(directory, "SELECT group_concat(seq) FROM history"), "1,2,3", "old rows keep their revision as key")
        expectEqual(state.classes, ["LabColor": Self.labColor])
        expectEqual(state.bindings, [1: Self.bindAtoB])
        expectEqual(state.lastBindingID, 1)
        expectEqual(try peek(directory, "SELECT value FROM meta WHERE key = 'schema_version'"), "\(SQLiteStore.schemaVersion)")
    }

    // MARK: - Locking, closing, reopening

    @Test func aSecondStoreOnTheSameDirectoryIsRefusedWhileTheFirstIsOpen() throws {
        let directory = TemporaryDirectory()
        let first = try open(directory)
        try first.commit(F.batch([F.entry(1, "a", ["v": 1])]))
        let error = #expect(throws: StorageError.self) { _ = try open(directory) }
        expectEqual(error, .locked(path: directory.path + "/kvod.sqlite3"))
        expectEqual(error?.description.contains("another kvod"), true)
        // The refused attempt did not disturb the first store.
        try first.commit(F.batch([F.entry(2, "a", ["v": 2])]))
        first.close()
        let second = try open(directory)
        expectEqual(try second.load().objects, ["a": ["v": 2]])
    }

    @Test func theLockIsTakenAtOpenEvenBeforeTheFirstCommit() throws {
        let directory = TemporaryDirectory()
        let first = try open(directory)
        #expect(throws: StorageError.locked(path: first.databasePath)) { _ = try open(directory) }
        first.close()
    }

    @Test func aLockReleasedWithinTheWaitIsTakenAndOneHeldLongerIsRefused() throws {
        let directory = TemporaryDirectory()
        // Another holder of the directory's lock file (a kvod exiting, or a child between fork and exec)
        // lets go 200 ms into the open's wait (StoreLock.contendedWaitMilliseconds).
        let held = Glibc.open(directory.path + "/" + SQLiteStore.fileName + ".lock", O_RDWR | O_CREAT, 0o644)
        #expect(held >= 0 && flock(held, LOCK_EX | LOCK_NB) == 0)
        let holder = Thread {
            usleep(200_000)
            Glibc.close(held)
        }
        holder.start()
        let started = ContinuousClock.now
        let store = try open(directory)
        let waited = ContinuousClock.now - started
        #expect(waited >= .milliseconds(150), "the open waited for the lock: \(waited)")
        // Held past the wait (by the store now open): refused, after the wait and not much longer.
        let refusedAt = ContinuousClock.now
        #expect(throws: StorageError.locked(path: store.databasePath)) { _ = try open(directory) }
        let refusal = ContinuousClock.now - refusedAt
        #expect(refusal >= .milliseconds(StoreLock.contendedWaitMilliseconds) && refusal < .seconds(10), "\(refusal)")
        store.close()
    }

    @Test func releasingAStoreWithoutClosingItReleasesTheLock() throws {
        let directory = TemporaryDirectory()
        do {
            let store = try open(directory)
            try store.commit(F.batch([F.entry(1, "a", ["v": 1])]))
        }
        let state = try reload(directory)
        expectEqual(state.objects, ["a": ["v": 1]])
        expectEqual(state.revision, 1)
    }

    @Test(arguments: [SyncMode.normal, .full, .off])
    func filesCopiedWhileTheStoreIsOpenHoldEveryCommit(sync: SyncMode) throws {
        // Copying the directory while the store is open and has not checkpointed gives the files a
        // SIGKILL leaves behind: the database file and its WAL, never closed.
        let directory = TemporaryDirectory()
        let store = try open(directory, sync: sync)
        for rev in 1...20 {
            try store.commit(F.batch([F.entry(UInt64(rev), "o\(rev % 4)", ["v": .int(Int64(rev))])]))
        }
        #expect(directory.fileNames.contains("kvod.sqlite3-wal"))
        let copy = TemporaryDirectory()
        for name in directory.fileNames {
            try FileManager.default.copyItem(atPath: directory.appending(name), toPath: copy.appending(name))
        }
        let state = try reload(copy)
        expectEqual(state.revision, 20)
        expectEqual(state.objects, ["o0": ["v": 20], "o1": ["v": 17], "o2": ["v": 18], "o3": ["v": 19]])
        expectEqual(state.history.count, 20)
        store.close()
    }

    @Test func usingAClosedStoreThrows() throws {
        let directory = TemporaryDirectory()
        let store = try open(directory)
        store.close()
        store.close()
        #expect(throws: StorageError.closed) { try store.commit(F.batch([F.entry(1, "a", ["v": 1])])) }
        #expect(throws: StorageError.closed) { _ = try store.load() }
        // Closing checkpoints the WAL into the database file.
        #expect(!directory.fileNames.contains("kvod.sqlite3-wal"))
    }

    // MARK: - Pragmas and the directory

    @Test(arguments: [(SyncMode.full, "2"), (.normal, "1"), (.off, "0")])
    func eachSyncModeSetsSynchronous(sync: SyncMode, expected: String) throws {
        let directory = TemporaryDirectory()
        let store = try open(directory, sync: sync)
        expectEqual(try store.pragma("synchronous"), expected)
        expectEqual(try store.pragma("journal_mode"), "wal")
        #expect(try store.pragma("locking_mode") == "normal")  // the directory lock is StoreLock
    }

    @Test func theSyncModesParseFromTheirFlagNames() {
        expectEqual(SyncMode(rawValue: "full"), .full)
        expectEqual(SyncMode(rawValue: "normal"), .normal)
        expectEqual(SyncMode(rawValue: "off"), .off)
        expectEqual(SyncMode(rawValue: "FULL"), nil)
    }

    @Test func missingDirectoriesAreCreated() throws {
        let directory = TemporaryDirectory()
        let nested = directory.appending("a/b/c/")
        let store = try SQLiteStore(directory: nested, sync: .normal, historyLimit: 10, historyByteLimit: 1000)
        expectEqual(store.databasePath, nested + "kvod.sqlite3")
        try store.commit(F.batch([F.entry(1, "a", ["v": 1])]))
        store.close()
        var isDirectory: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: directory.appending("a/b/c"), isDirectory: &isDirectory))
        #expect(isDirectory.boolValue)
        #expect(FileManager.default.fileExists(atPath: directory.appending("a/b/c/kvod.sqlite3")))
    }

    @Test func aFileInTheWayIsADirectoryError() throws {
        let directory = TemporaryDirectory()
        #expect(FileManager.default.createFile(atPath: directory.appending("file"), contents: Data("x".utf8)))
        let error = #expect(throws: StorageError.self) {
            _ = try SQLiteStore(directory: directory.appending("file/sub"), sync: .normal, historyLimit: 1,
                                    historyByteLimit: 1)
        }
        guard case let .directory(path, reason) = error else {
            Issue.record("expected a directory error, got \(String(describing: error))")
            return
        }
        expectEqual(path, directory.appending("file/sub"))
        #expect(reason.contains("not a directory"))
    }
}
