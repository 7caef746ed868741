import Foundation
import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// The persistent store's snapshot-plus-redo layout (issue 10 item 6): a write stores its change, not
/// its object; snapshots are rewritten when an object's redo passes its snapshot's size; a load replays
/// the redo exactly; a version-2 database is migrated in place.
@Suite("redo log store")
struct RedoLogStoreTests {
    private func open(_ directory: TemporaryDirectory, sync: SyncMode = .normal) throws -> SQLiteStore {
        try SQLiteStore(directory: directory.path, sync: sync, historyLimit: 1000, historyByteLimit: 1 << 30)
    }

    private func count(_ store: SQLiteStore, _ sql: String) throws -> Int {
        Int(try store.queryText(sql)) ?? -1
    }

    private static func randomValue(_ random: inout SplitMix64, size: Int) -> JSONValue {
        switch Int.random(in: 0..<4, using: &random) {
        case 0: return .int(Int64.random(in: -1000...1000, using: &random))
        case 1: return .string(String(repeating: "x", count: Int.random(in: 0...size, using: &random)))
        case 2: return .array([.int(1), .string(String(repeating: "y", count: Int.random(in: 0...size, using: &random)))])
        default: return .object(["k": .string(String(repeating: "z", count: Int.random(in: 0...size, using: &random)))])
        }
    }

    @Test("random writes committed in batches reload exactly, through redo replay and snapshot rewrites",
          arguments: [UInt64(11), 12, 13])
    func randomWritesReloadExactly(seed: UInt64) throws {
        var random = SplitMix64(state: seed)
        let directory = TemporaryDirectory()
        var store = try open(directory)
        _ = try store.load()
        let engine = KVOEngine(recordsCommitBatches: true)
        var notifications: [ChangeNotification] = []
        var sawRedo = false, sawCompaction = false
        var previousRedoRows = 0
        let ids = ["big", "small", "other"]
        _ = try engine.create("big", values: ["list": .array((0..<200).map { .string("element \($0) " + String(repeating: "b", count: 50)) })],
                              notifications: &notifications)
        for step in 0..<600 {
            let id = ids.randomElement(using: &random)!
            let value = Self.randomValue(&random, size: id == "big" ? 40 : 8)
            do {
                switch Int.random(in: 0..<10, using: &random) {
                case 0:
                    if (try? engine.get(id, keyPath: nil)) == nil {
                        _ = try engine.create(id, values: ["list": [], "v": value], notifications: &notifications)
                    } else if id != "big" {
                        _ = try engine.delete(id, notifications: &notifications)
                    }
                case 1...4:
                    _ = try engine.set(id, keyPath: KeyPath(["v", "w", "list.0"].randomElement(using: &random)!), value: value,
                                       notifications: &notifications)
                case 5...7:
                    _ = try engine.mutateArray(id, keyPath: KeyPath("list"), .insert(indexes: [0], values: [value]),
                                               notifications: &notifications)
                default:
                    _ = try engine.mutateArray(id, keyPath: KeyPath("list"), .remove(indexes: [0]), notifications: &notifications)
                }
            } catch {
                // not_found, out_of_range and the like: nothing changed, as the engine promises.
            }
            let reopens = Int.random(in: 0..<60, using: &random) == 0 || step == 599
            if Int.random(in: 0..<4, using: &random) == 0 || reopens {
                try store.commit(engine.takeCommitBatch())
                let redoRows = try count(store, "SELECT count(*) FROM redo")
                if redoRows > 0 { sawRedo = true }
                if redoRows < previousRedoRows { sawCompaction = true }
                previousRedoRows = redoRows
            }
            if reopens {
                store.close()
                store = try open(directory)
                let state = try store.load()
                for id in ids {
                    expectEqual(state.objects[id], (try? engine.get(id, keyPath: nil)), "step \(step): \(id)")
                }
                expectEqual(state.revision, engine.revision)
            }
        }
        store.close()
        #expect(sawRedo && sawCompaction, "redo rows seen \(sawRedo), snapshot rewrites seen \(sawCompaction)")
    }

    @Test("a small write to a large object stores the change, not the object; redo stays below the snapshot's size")
    func smallWritesStoreChangesOnly() throws {
        let directory = TemporaryDirectory()
        let store = try open(directory)
        _ = try store.load()
        let engine = KVOEngine(recordsCommitBatches: true)
        var notifications: [ChangeNotification] = []
        let big = String(repeating: "x", count: 200_000)
        _ = try engine.create("o", values: ["big": .string(big), "n": 0], notifications: &notifications)
        try store.commit(engine.takeCommitBatch())
        for n in 1...100 {
            _ = try engine.set("o", keyPath: KeyPath("n"), value: .int(Int64(n)), notifications: &notifications)
            try store.commit(engine.takeCommitBatch())
        }
        expectEqual(try count(store, "SELECT count(*) FROM redo WHERE object = 'o'"), 100)
        // The snapshot is still the first one: n = 0.
        expectEqual(try store.queryText("SELECT instr(value, '\"n\":0') > 0 FROM objects WHERE id = 'o'"), "1")
        #expect(try count(store, "SELECT sum(length(change)) FROM redo") < 200_000)
        store.close()
        let reopened = try open(directory)
        expectEqual(try reopened.load().objects["o"]?["n"], 100)
        reopened.close()
    }

    @Test("a version-2 database is migrated in place: its objects are snapshots, writes then go to redo")
    func versionTwoIsMigrated() throws {
        let directory = TemporaryDirectory()
        // What the version-2 store wrote (its schema, verbatim).
        let database = try SQLiteDatabase(path: directory.appending("kvod.sqlite3"))
        try database.exec("""
            CREATE TABLE objects(id TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
            CREATE TABLE meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID;
            CREATE TABLE history(rev INTEGER PRIMARY KEY, object TEXT NOT NULL, change TEXT NOT NULL, bytes INTEGER NOT NULL);
            CREATE TABLE classes(name TEXT PRIMARY KEY, definition TEXT NOT NULL);
            CREATE TABLE bindings(id INTEGER PRIMARY KEY, definition TEXT NOT NULL);
            INSERT INTO meta(key, value) VALUES('schema_version', 2), ('revision', 7), ('last_binding_id', 0);
            INSERT INTO objects(id, value) VALUES('a', '{"text":"\(String(repeating: "t", count: 500))","v":1}'), ('b', '{"w":2}');
            """)
        database.close()
        let store = try open(directory)
        expectEqual(try store.queryText("SELECT value FROM meta WHERE key = 'schema_version'"), "\(SQLiteStore.schemaVersion)")
        let state = try store.load()
        expectEqual(state.objects["a"]?["v"], 1)
        expectEqual(state.objects["b"], ["w": 2])
        expectEqual(state.revision, 7)
        let engine = KVOEngine(restoring: state)
        var notifications: [ChangeNotification] = []
        _ = try engine.set("a", keyPath: KeyPath("v"), value: 2, notifications: &notifications)
        try store.commit(engine.takeCommitBatch())
        expectEqual(try count(store, "SELECT count(*) FROM redo WHERE object = 'a'"), 1)
        store.close()
        let reopened = try open(directory)
        let reloaded = try reopened.load()
        expectEqual(reloaded.objects["a"], (try engine.get("a", keyPath: nil)))
        expectEqual(reloaded.objects["b"], ["w": 2])
        expectEqual(reloaded.revision, 8)
        reopened.close()
    }

    @Test("a damaged redo row refuses the load, naming it")
    func damagedRedoRowIsCorrupt() throws {
        let directory = TemporaryDirectory()
        var store = try open(directory)
        _ = try store.load()
        let engine = KVOEngine(recordsCommitBatches: true)
        var notifications: [ChangeNotification] = []
        _ = try engine.create("o", values: ["big": .string(String(repeating: "x", count: 1000)), "n": 0], notifications: &notifications)
        _ = try engine.set("o", keyPath: KeyPath("n"), value: 1, notifications: &notifications)
        try store.commit(engine.takeCommitBatch())
        _ = try engine.set("o", keyPath: KeyPath("n"), value: 2, notifications: &notifications)
        try store.commit(engine.takeCommitBatch())
        store.close()
        for (sql, expected) in [("UPDATE redo SET rev = 99", "past"), ("UPDATE redo SET change = '{'", "invalid JSON"),
                                ("UPDATE redo SET object = 'gone'", "has no snapshot")] {
            let copy = TemporaryDirectory()
            try FileManager.default.removeItem(atPath: copy.path)
            try FileManager.default.copyItem(atPath: directory.path, toPath: copy.path)
            let database = try SQLiteDatabase(path: copy.appending("kvod.sqlite3"))
            try database.exec(sql)
            database.close()
            store = try open(copy)
            let error = #expect(throws: StorageError.self) { _ = try store.load() }
            expectEqual(error?.description.contains("redo"), true, "\(sql): \(String(describing: error))")
            if expected != "past" { #expect(error?.description.contains(expected) == true, "\(sql): \(String(describing: error))") }
            store.close()
        }
    }
}
