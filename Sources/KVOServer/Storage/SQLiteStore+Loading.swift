import CLibUV
import CSQLite
import KVOEngine
import KVOJSON
import KVOModel

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reading a data directory back: objects (snapshots and redo rows), history, classes, bindings and the counters.
/// Loop thread (or the thread that opened it), like the rest of `SQLiteStore`.
extension SQLiteStore {
    /// Reads everything back: every object (its snapshot with its redo rows replayed), the revision (0
    /// for a new database), the kept history (oldest first), every class and binding and the binding id
    /// counter. A row that does not decode or holds a value out of range throws `.corrupt` naming it
    /// (`object 'a'`, `redo 'a' rev 12`, `history rev 12`, `class 'LabColor'`, `binding 7`).
    ///
    /// Objects are not decoded: each snapshot that is `JSONWriter`'s own text (`CanonicalObjectScan`, a
    /// scan that builds nothing) is copied as it is into a packed slot (`ObjectTable`); any other text is
    /// parsed, which reports a corrupt row as before, and encoded again. An object with redo rows is
    /// decoded, replayed and packed again. The ids come out of the table (`WITHOUT ROWID`, keyed by id)
    /// in byte order, which `SortedObjectIDs` checks against its own order before it sorts.
    ///
    /// History entries are restored packed (`HistoryEntry`: the change's JSON text, decoded when a replay
    /// needs it). A row is checked here, so that a corrupt one is refused at load as before: a `created` or
    /// `deleted` row whose text is `JSONWriter`'s own is scanned (`CanonicalObjectScan`, which also gives its
    /// estimated size); any other row is decoded, checked, and packed again as `JSONWriter` writes it.
    package func load() throws(StorageError) -> PersistedState {
        guard let database else { throw .closed }
        var state = PersistedState()
        state.revision = try readRevision(database) ?? 0
        state.lastBindingID = try readLastBindingID(database) ?? 0

        let count = try database.prepare("SELECT count(*) FROM objects")
        defer { count.finalize() }
        let rows = try count.step() ? Int(count.int64(0)) : 0

        objectLogs.removeAll()
        // The table is filled on a thread of its own while this one reads the rows (`ObjectTableFiller`).
        let filler = ObjectTableFiller(expectedRows: rows)
        do throws(StorageError) {
            try readObjectRows(database, into: filler)
        } catch {
            _ = filler.finish()
            throw error
        }
        var (objects, ids) = filler.finish()
        state.objects = objects
        state.sortedIDs = SortedObjectIDs(ids)
        ids = []
        try replayRedo(database, into: &state)
        knowsEveryRedoRow = true
        snapshotsLoaded = true

        let history = try database.prepare("SELECT rev, object, change FROM history ORDER BY seq")
        defer { history.finalize() }
        state.history.reserveCapacity(ledger.count)
        while try history.step() {
            let objectIsText = history.isText(1)
            let rev = UInt64(bitPattern: history.int64(0))
            let row = "history rev \(rev)"
            guard objectIsText else { throw .corrupt(row: row, reason: "the object id is not text") }
            if rev > state.revision {
                throw .corrupt(row: row, reason: "the revision is past the stored revision \(state.revision)")
            }
            let object = history.string(1)
            let text = history.textBytes(2)
            if let size = RecordedChange.estimatedSize(ofCanonicalCreationOrDeletion: text) {
                state.history.append(HistoryEntry(rev: rev, object: object, packedText: text, estimatedSize: size))
                continue
            }
            let change = try decodeChange(text, row: row)
            state.history.append(HistoryEntry(rev: rev, object: object, packing: change))
        }

        let classes = try database.prepare("SELECT name, definition FROM classes")
        defer { classes.finalize() }
        while try classes.step() {
            let nameIsText = classes.isText(0)
            let name = classes.string(0)
            guard nameIsText else { throw .corrupt(row: "class '\(name)'", reason: "the name is not text") }
            state.classes[name] = try decodeDefinition(classes.textBytes(1), row: "class '\(name)'")
        }

        let bindings = try database.prepare("SELECT id, definition FROM bindings")
        defer { bindings.finalize() }
        while try bindings.step() {
            let idIsInteger = bindings.isInteger(0)
            let storedID = bindings.int64(0)
            guard idIsInteger, (1...SQLiteStore.maximumCounter).contains(storedID) else {
                throw .corrupt(row: "binding \(bindings.string(0))",
                               reason: "the id is not an integer from 1 to \(SQLiteStore.maximumCounter)")
            }
            let id = UInt64(storedID)
            state.bindings[id] = try decodeDefinition(bindings.textBytes(1), row: "binding \(id)")
            // Never hand out a live binding's id again, even if the counter lags behind it.
            state.lastBindingID = max(state.lastBindingID, id)
        }

        let expiries = try database.prepare("SELECT object, ttl, deadline FROM expiries")
        defer { expiries.finalize() }
        while try expiries.step() {
            let object = expiries.string(0)
            guard expiries.isInteger(1), expiries.isInteger(2), (1...KVOEngine.maximumTTL).contains(expiries.int64(1)) else {
                throw .corrupt(row: "expiry of '\(object)'", reason: "the ttl and deadline must be integers, the ttl from 1 to \(KVOEngine.maximumTTL)")
            }
            state.expiries[object] = Expiry(ttl: expiries.int64(1), deadline: expiries.int64(2))
        }
        return state
    }

    /// Reads every row of `objects` into `filler` in the table's order: each snapshot that is `JSONWriter`'s
    /// own text copied as it is, any other text parsed (a corrupt row throws `.corrupt` naming it) and
    /// encoded again.
    func readObjectRows(_ database: SQLiteDatabase, into filler: ObjectTableFiller) throws(StorageError) {
        let objects = try database.prepare("SELECT id, value, rev FROM objects")
        defer { objects.finalize() }
        while try objects.step() {
            // Types first: reading a column as text or as a number may convert it in place.
            let idIsText = objects.isText(0)
            let revIsInteger = objects.isInteger(2)
            let id = objects.string(0)
            guard idIsText else { throw .corrupt(row: "object '\(id)'", reason: "the id is not text") }
            let changed = objects.int64(2)
            guard revIsInteger, changed >= 0 else {
                throw .corrupt(row: "object '\(id)'", reason: "its revision '\(objects.string(2))' is not a non-negative integer")
            }
            let text = objects.textBytes(1)
            let packed: PackedObject
            if CanonicalObjectScan.isCanonicalObject(text) {
                packed = PackedObject.make(copying: text, changed: UInt64(changed))
            } else {
                let value = try decode(text, row: "object '\(id)'")
                guard case let .object(members) = value else {
                    throw .corrupt(row: "object '\(id)'", reason: "the value is not a JSON object")
                }
                packed = PackedObject.make(encoding: members, changed: UInt64(changed))
            }
            filler.add(id, packed)
        }
    }

    /// Applies every object's redo rows, in revision order, to its snapshot in `state`, checking each
    /// row (its revision within the stored revision, its object snapshotted, its change decodable and
    /// applicable) and counting its bytes in `objectLogs`.
    func replayRedo(_ database: SQLiteDatabase, into state: inout PersistedState) throws(StorageError) {
        let redo = try database.prepare("SELECT object, rev, change FROM redo ORDER BY object, rev")
        defer { redo.finalize() }
        var currentID: String?
        var current: JSONValue?
        var snapshotBytes = 0
        var redoBytes = 0
        var lastRev: UInt64 = 0
        func finish() {
            guard let id = currentID, case let .object(members)? = current else { return }
            // The last redo row is the object's last change (a snapshot is older than its redo rows).
            state.objects.setPacked(id, members: members, changed: lastRev)
            objectLogs[id] = ObjectLog(snapshotBytes: snapshotBytes, redoBytes: redoBytes)
        }
        while try redo.step() {
            let objectIsText = redo.isText(0)
            let revIsInteger = redo.isInteger(1)
            let id = redo.string(0)
            let rev = redo.int64(1)
            let row = "redo '\(id)' rev \(redo.string(1))"
            guard objectIsText else { throw .corrupt(row: row, reason: "the object id is not text") }
            guard revIsInteger, rev >= 1, UInt64(rev) <= state.revision else {
                throw .corrupt(row: row, reason: "the revision is not an integer from 1 to the stored revision \(state.revision)")
            }
            if id != currentID {
                finish()
                guard let snapshot = state.objects[id] else {
                    throw .corrupt(row: row, reason: "object '\(id)' has no snapshot")
                }
                currentID = id
                current = snapshot
                snapshotBytes = try storedSnapshotBytes(of: id) ?? 0
                redoBytes = 0
            }
            lastRev = UInt64(rev)
            let text = redo.textBytes(2)
            redoBytes += text.count
            let change = try decodeChange(text, row: row)
            switch change {
            case .created, .deleted, .expired:
                throw .corrupt(row: row, reason: "a redo row cannot create or delete its object")
            case .set, .array:
                change.apply(to: &current, forward: true)
            }
        }
        finish()
    }

    /// The bytes of object `id`'s snapshot row, nil when it has none.
    func storedSnapshotBytes(of id: String) throws(StorageError) -> Int? {
        guard let statement = statements?.snapshotBytes else { throw .closed }
        defer { statement.reset() }
        try statement.bind(1, text: id)
        guard try statement.step(), !statement.isNull(0) else { return nil }
        return Int(statement.int64(0))
    }

    /// The log of object `id`, which `objectLogs` does not hold: after `load()`, its snapshot's size (it
    /// has no redo rows) or, without a snapshot, a new object; otherwise unknown.
    func storedLog(of id: String) throws(StorageError) -> ObjectLog {
        guard snapshotsLoaded else { return .unknown(redoMayExist: !knowsEveryRedoRow) }
        guard let bytes = try storedSnapshotBytes(of: id) else { return .unknown(redoMayExist: false) }
        return ObjectLog(snapshotBytes: bytes, redoBytes: 0)
    }

    /// A class or binding definition: JSON text that must hold an object.
    func decodeDefinition(_ text: UnsafeBufferPointer<UInt8>, row: String) throws(StorageError) -> JSONValue {
        let definition = try decode(text, row: row)
        guard case .object = definition else { throw .corrupt(row: row, reason: "the definition is not a JSON object") }
        return definition
    }

    /// A history or redo row's change (`RecordedChange+JSON`); `.corrupt` naming `row` when it does not decode.
    func decodeChange(_ text: UnsafeBufferPointer<UInt8>, row: String) throws(StorageError) -> RecordedChange {
        let json = try decode(text, row: row)
        do throws(ChangeDecodingError) {
            return try RecordedChange(json: json)
        } catch {
            throw .corrupt(row: row, reason: error.reason)
        }
    }

    func decode(_ text: UnsafeBufferPointer<UInt8>, row: String) throws(StorageError) -> JSONValue {
        do throws(JSONParseError) {
            return try JSONParser.parse(text)
        } catch {
            throw .corrupt(row: row, reason: "invalid JSON: \(error)")
        }
    }

    /// Cluster mode: the last stream sequence whose writes are stored (`meta` row `stream_sequence`,
    /// written by `commit` with them); 0 when none is.
    package func readStreamSequence() throws(StorageError) -> UInt64 {
        guard let database else { throw .closed }
        return try readCounter(database, key: "stream_sequence", what: "a stream sequence") ?? 0
    }

    /// Cluster mode: what the node knew of the stream at the stored stream sequence (`meta` row
    /// `stream_integrity`, `StreamIntegrity`'s state, written with it); nil when none is stored (a store
    /// of an older kvod).
    package func readStreamIntegrity() throws(StorageError) -> [UInt8]? {
        guard let database else { throw .closed }
        let query = try database.prepare("SELECT value FROM meta WHERE key = 'stream_integrity'")
        defer { query.finalize() }
        guard try query.step() else { return nil }
        return Array(query.string(0).utf8)
    }

    /// Cluster mode: the stream this data directory belongs to (`meta` row `cluster_stream`, written by
    /// `recordClusterStream` when a cluster node first starts on it); nil for a directory no cluster node used.
    package func readClusterStream() throws(StorageError) -> String? {
        guard let database else { throw .closed }
        let query = try database.prepare("SELECT value FROM meta WHERE key = 'cluster_stream'")
        defer { query.finalize() }
        guard try query.step() else { return nil }
        return query.string(0)
    }

    /// Cluster mode: marks this data directory as the state of stream `name`, so that it is never started
    /// alone or as a node of another stream (Server checks at start-up).
    package func recordClusterStream(_ name: String) throws(StorageError) {
        guard let database else { throw .closed }
        let statement = try database.prepare(
            "INSERT INTO meta(key, value) VALUES('cluster_stream', ?1) ON CONFLICT(key) DO UPDATE SET value = excluded.value")
        defer { statement.finalize() }
        try statement.bind(1, text: name)
        _ = try statement.step()
    }

    func readRevision(_ database: SQLiteDatabase) throws(StorageError) -> UInt64? {
        try readCounter(database, key: "revision", what: "a revision")
    }

    func readLastBindingID(_ database: SQLiteDatabase) throws(StorageError) -> UInt64? {
        try readCounter(database, key: "last_binding_id", what: "a binding id")
    }

    /// An integer from 0 to `maximumCounter` kept in `meta` under `key` (nil when the row is missing);
    /// anything else throws `.corrupt` for row `meta <key>`, saying the value is not `what`.
    func readCounter(_ database: SQLiteDatabase, key: String, what: String) throws(StorageError) -> UInt64? {
        let query = try database.prepare("SELECT value FROM meta WHERE key = ?1")
        defer { query.finalize() }
        try query.bind(1, text: key)
        guard try query.step() else { return nil }
        let isInteger = query.isInteger(0)
        let value = query.int64(0)
        guard isInteger, (0...SQLiteStore.maximumCounter).contains(value) else {
            throw .corrupt(row: "meta \(key)",
                           reason: "'\(query.string(0))' is not \(what) (an integer from 0 to \(SQLiteStore.maximumCounter))")
        }
        return UInt64(value)
    }
}
