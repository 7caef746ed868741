import Foundation
import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// `SQLiteStore` against damaged and foreign database files: each damage is named (the object, the
/// revision, the class), a newer schema is refused and left alone, and the fast change text is the
/// canonical one. The same suite as SQLiteStoreTests (its `open` helper), in a file of its own.
extension SQLiteStoreTests {

    /// Runs SQL on the closed database directly.
    func tamper(_ directory: TemporaryDirectory, _ sql: String) throws {
        let database = try SQLiteDatabase(path: directory.appending("kvod.sqlite3"))
        try database.exec(sql)
        database.close()
    }

    /// Reads one value from the closed database directly.
    func peek(_ directory: TemporaryDirectory, _ sql: String) throws -> String {
        let database = try SQLiteDatabase(path: directory.appending("kvod.sqlite3"))
        defer { database.close() }
        let query = try database.prepare(sql)
        defer { query.finalize() }
        return try query.step() ? query.string(0) : ""
    }

    /// Commits `entries` in a store that is closed again at once.
    func seed(_ directory: TemporaryDirectory, _ entries: [FixtureEntry]) throws {
        let store = try open(directory)
        defer { store.close() }
        try store.commit(F.batch(entries))
    }

    @Test func aCorruptObjectRowNamesTheObject() throws {
        let directory = TemporaryDirectory()
        try seed(directory, [F.entry(1, "good", ["v": 1]), F.entry(2, "bad", ["v": 2])])
        try tamper(directory, "UPDATE objects SET value = '{\"v\": ' WHERE id = 'bad'")
        let store = try open(directory)
        let error = #expect(throws: StorageError.self) { _ = try store.load() }
        guard case let .corrupt(row, reason) = error else {
            Issue.record("expected a corrupt-row error, got \(String(describing: error))")
            return
        }
        expectEqual(row, "object 'bad'")
        #expect(reason.hasPrefix("invalid JSON"))
    }

    @Test func anObjectThatIsNotAJSONObjectIsCorrupt() throws {
        let directory = TemporaryDirectory()
        try seed(directory, [F.entry(1, "a", ["v": 1])])
        try tamper(directory, "UPDATE objects SET value = '[1,2]' WHERE id = 'a'")
        let store = try open(directory)
        #expect(throws: StorageError.corrupt(row: "object 'a'", reason: "the value is not a JSON object")) {
            _ = try store.load()
        }
    }

    @Test func aCorruptHistoryRowNamesItsRevision() throws {
        let directory = TemporaryDirectory()
        let change = ArrayChangeRecord(path: ["l"], kind: .insertion, indexes: [0], old: [], new: [1])
        try seed(directory, [F.entry(1, "a", ["l": []]), F.entry(2, "a", ["l": [1]], change: change)])
        try tamper(directory, "UPDATE history SET change = '{\"array\":{\"path\":[\"l\"],\"kind\":9,\"indexes\":[0],\"old\":[],\"new\":[1]}}' WHERE rev = 2")
        let store = try open(directory)
        #expect(throws: StorageError.corrupt(row: "history rev 2", reason: "'kind' is not a change kind")) {
            _ = try store.load()
        }
        store.close()
        try tamper(directory, "UPDATE history SET change = 'nope' WHERE rev = 2")
        let again = try open(directory)
        let error = #expect(throws: StorageError.self) { _ = try again.load() }
        expectEqual(error?.description.contains("history rev 2"), true)
    }

    @Test func aRevisionStoredAsTextIsCorrupt() throws {
        let directory = TemporaryDirectory()
        try seed(directory, [F.entry(1, "a", ["v": 1])])
        try tamper(directory, "UPDATE meta SET value = 'seven' WHERE key = 'revision'")
        #expect(throws: StorageError.corrupt(row: "meta revision", reason: "'seven' is not a revision (an integer from 0 to 4611686018427387904)")) {
            _ = try open(directory)
        }
    }

    @Test func aNewerSchemaIsRefusedAndLeftAlone() throws {
        let directory = TemporaryDirectory()
        try seed(directory, [F.entry(1, "a", ["v": 1])])
        let newer = SQLiteStore.schemaVersion + 1
        try tamper(directory, "UPDATE meta SET value = \(newer) WHERE key = 'schema_version'")
        let error = #expect(throws: StorageError.self) { _ = try open(directory) }
        expectEqual(error, .unsupportedSchema(path: directory.appending("kvod.sqlite3"), found: newer, supported: SQLiteStore.schemaVersion))
        // Refusing did not rewrite the version or anything else.
        expectEqual(try peek(directory, "SELECT value FROM meta WHERE key = 'schema_version'"), "\(newer)")
        expectEqual(try peek(directory, "SELECT value FROM objects WHERE id = 'a'"), #"{"v":1}"#)
    }

    @Test func aCorruptClassRowNamesTheClass() throws {
        let directory = TemporaryDirectory()
        let store = try open(directory)
        try store.commit(CommitBatch(revision: 0, entries: [], objects: [:], classes: ["LabColor": Self.labColor, "Good": [:]]))
        store.close()
        try tamper(directory, "UPDATE classes SET definition = '{\"name\": ' WHERE name = 'LabColor'")
        let reopened = try open(directory)
        let error = #expect(throws: StorageError.self) { _ = try reopened.load() }
        guard case let .corrupt(row, reason) = error else {
            Issue.record("expected a corrupt-row error, got \(String(describing: error))")
            return
        }
        expectEqual(row, "class 'LabColor'")
        #expect(reason.hasPrefix("invalid JSON"))
    }

    @Test func aBindingThatIsNotAJSONObjectIsCorrupt() throws {
        let directory = TemporaryDirectory()
        let store = try open(directory)
        try store.commit(CommitBatch(revision: 0, entries: [], objects: [:], bindings: [7: Self.bindAtoB], lastBindingID: 7))
        store.close()
        try tamper(directory, "UPDATE bindings SET definition = '[1,2]' WHERE id = 7")
        let reopened = try open(directory)
        #expect(throws: StorageError.corrupt(row: "binding 7", reason: "the definition is not a JSON object")) {
            _ = try reopened.load()
        }
        reopened.close()
        try tamper(directory, "UPDATE bindings SET definition = 'nope' WHERE id = 7")
        let again = try open(directory)
        let error = #expect(throws: StorageError.self) { _ = try again.load() }
        expectEqual(error?.description.contains("binding 7"), true)
    }

    @Test func aLastBindingIDStoredAsTextIsCorrupt() throws {
        let directory = TemporaryDirectory()
        let store = try open(directory)
        try store.commit(CommitBatch(revision: 0, entries: [], objects: [:], lastBindingID: 3))
        store.close()
        try tamper(directory, "UPDATE meta SET value = 'three' WHERE key = 'last_binding_id'")
        #expect(throws: StorageError.corrupt(row: "meta last_binding_id", reason: "'three' is not a binding id (an integer from 0 to 4611686018427387904)")) {
            _ = try open(directory)
        }
    }

    @Test func theFastChangeTextIsByteForByteTheCanonicalOne() throws {
        let changes: [RecordedChange] = [
            .set(path: ["v"], old: nil, new: "x"),
            .set(path: ["address", "city"], old: "Oslo", new: ["a\"b": [1, 2.5, .null], "é\n": true]),
            .set(path: ["items", "0", "k\"ey"], old: .null, new: .null),
            .created(["a": 1]),
            .deleted(["b": [1, 2]]),
            .array(ArrayChangeRecord(path: ["items"], kind: .insertion, indexes: [1], old: [], new: ["milk"])),
        ]
        for change in changes {
            var fast: [UInt8] = []
            change.writeJSON(into: &fast)
            var canonical: [UInt8] = []
            JSONWriter.write(change.json, into: &canonical)
            expectEqual(fast, canonical, "\(String(decoding: canonical, as: UTF8.self))")
            expectEqual(try RecordedChange(json: JSONParser.parse(fast)), change)
        }
    }
}
