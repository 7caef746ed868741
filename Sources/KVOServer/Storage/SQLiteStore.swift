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

/// kvod's durable state: every object, the revision counter, the most recent history, every class and
/// binding definition and the binding id counter, in one SQLite database, `<directory>/kvod.sqlite3`.
///
/// The server loads the state once at startup (`load()`), then calls `commit(_:)` once per loop
/// iteration with everything the engine accepted in that iteration, before the replies go out; one
/// commit is one transaction, so durability costs at most one fsync per iteration (`SyncMode.full`),
/// not one per request.
///
/// On disk (schema version 4):
///
///     objects(id TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID   -- a snapshot, as compact JSON
///     redo(object TEXT NOT NULL, rev INTEGER NOT NULL, change TEXT NOT NULL,
///          PRIMARY KEY(object, rev)) WITHOUT ROWID                      -- the changes since the snapshot
///     meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID                   -- schema_version, revision, last_binding_id, stream_sequence and cluster_stream (cluster)
///     history(rev INTEGER PRIMARY KEY, object TEXT NOT NULL, change TEXT NOT NULL, bytes INTEGER NOT NULL)
///     classes(name TEXT PRIMARY KEY, definition TEXT NOT NULL)          -- the definition as compact JSON
///     bindings(id INTEGER PRIMARY KEY, definition TEXT NOT NULL)        -- the definition as compact JSON
///     users(name TEXT PRIMARY KEY, record TEXT NOT NULL) WITHOUT ROWID  -- `UserRecord.json`, compact
///
/// Version 2 added `classes`, `bindings` and `meta.last_binding_id`; version 3 added `redo`; version 4
/// added `users` (written by `kvod user` and the admin operations, not by commits). An older
/// database is migrated in place when opened: the new tables are created and the version bumped in one
/// transaction (the existing rows are untouched: an object row of an older version is a snapshot with
/// no changes after it; a missing `last_binding_id` reads as 0).
///
/// An object is its snapshot plus its `redo` rows replayed in revision order, so that the cost of a
/// write follows the size of the change, not of the object: a commit appends each write's change (the
/// same text as its history row) to `redo`, and rewrites an object's snapshot (deleting its redo rows)
/// only when the object was created or deleted in the batch, or when its redo rows would add up to more
/// bytes than its snapshot. Each byte of snapshot written is then paid for by at least as many bytes of
/// changes: at most about twice the bytes of the changes themselves, and a load replays at most one
/// snapshot's worth of changes per object.
///
/// A history row's `change` is the write as a delta (`RecordedChange.json`: what was created,
/// deleted, set at a path with its old and new value, or changed in an array), never a copy of the
/// whole object, and `bytes` its length. After each commit history keeps at most `historyLimit` rows and at most
/// `historyByteLimit` bytes (the newest row is kept even when it alone is larger), oldest dropped first.
///
/// The database is in WAL mode. The store holds `<database>.lock` locked (`StoreLock`) from `init` to
/// `close()`, so a second kvod on the same directory fails at startup with `StorageError.locked`.
///
/// Checkpoints (copying the WAL into the database file) never run inside a commit: SQLite's automatic
/// ones are off (a WAL hook counts the frames instead, `WALFrameCounter`). Once the WAL holds
/// `walCheckpointStartBytes`, `afterCommit(on:)` runs a passive checkpoint on a second connection on the
/// loop's thread pool (`startBackgroundCheckpoints`, `WALCheckpointJob`); when a commit takes the WAL past
/// `walLimitBytes` anyway (background checkpoints not keeping up, or none: a store used without a server),
/// that commit ends with `checkpointBlocking()`, which checkpoints and truncates it on the calling (loop)
/// thread, and `afterCommit(on:)` reports it for the server's log. All of that is this store's own
/// business: the server sees a `Store` (`SQLiteStore+Store.swift`), never the WAL.
///
/// The `Store` of a kvod with `--data`; also used directly by `kvod user --data` and kvod-bench.
/// Owned by the server; every method, `init` included, must be called from one thread, the loop thread.
/// Not Sendable.
public final class SQLiteStore {
    /// The schema this version writes and reads. A database with a newer one is refused.
    public static let schemaVersion: Int64 = 4
    /// The database file's name inside the data directory.
    public static let fileName = "kvod.sqlite3"
    /// Cap on the `-wal` file kept after a checkpoint (SQLite's `journal_size_limit`), so one large
    /// commit does not leave a large WAL behind.
    static let walSizeLimit = 64 << 20
    /// The default `walLimitBytes` (`kvod --wal-limit`).
    public static let defaultWALLimitBytes = 64 << 20
    /// The smallest `walLimitBytes` accepted (smaller values are raised to it).
    public static let minimumWALLimitBytes = 64 << 10
    /// How long a blocking checkpoint waits for a lock (the background checkpoint's, or a reader's).
    static let blockingCheckpointTimeoutMilliseconds: Int32 = 10_000
    /// The largest revision or binding id a database may hold (`KVOEngine.maximumCounter`, 2^62, which
    /// the engine never passes): a larger stored value is a damaged row, refused when the store opens.
    public static let maximumCounter = Int64(KVOEngine.maximumCounter)
    /// The largest `history.bytes` a row may claim (SQLite's own maximum text length is 1 GB).
    static let maximumHistoryRowBytes: Int64 = Int64(Int32.max)
    /// The tables every database of the current schema has, in the order they are checked.
    static let requiredTables = ["meta", "objects", "history", "classes", "bindings", "redo", "users"]

    /// The tables a database of schema `version` has (version 1: no classes or bindings; 2: no redo).
    static func requiredTables(ofVersion version: Int64) -> [String] {
        switch version {
        case 1: return ["meta", "objects", "history"]
        case 2: return ["meta", "objects", "history", "classes", "bindings"]
        case 3: return ["meta", "objects", "history", "classes", "bindings", "redo"]
        default: return requiredTables
        }
    }

    /// `<directory>/kvod.sqlite3`.
    public let databasePath: String
    public let sync: SyncMode
    public let historyLimit: Int
    public let historyByteLimit: Int
    /// The WAL's hard bound in bytes: past it, `checkpointNeed` is `.blocking`.
    public let walLimitBytes: Int
    /// Where a background checkpoint starts: 1/16 of `walLimitBytes` (4 MiB by default, SQLite's own
    /// automatic checkpoint point).
    public var walCheckpointStartBytes: Int { walLimitBytes / 16 }
    /// How long `checkpointBlocking()` waits for the locks it needs: `blockingCheckpointTimeoutMilliseconds`,
    /// shorter only in tests of a wait that runs out.
    var blockingCheckpointWaitMilliseconds = SQLiteStore.blockingCheckpointTimeoutMilliseconds
    /// The data directory's lock, held until `close()`.
    private var lock: StoreLock?
    /// The server's store only (`startBackgroundCheckpoints`): the passive checkpoint on the thread pool,
    /// queued by `afterCommit(on:)`; its own connection, owned as `WALCheckpointJob` says. Nil otherwise.
    var backgroundCheckpoint: WALCheckpointJob?
    /// Blocking checkpoints (the WAL past `walLimitBytes`), reported by `afterCommit(on:)` at most once a
    /// second, the rest counted.
    var blockingCheckpointLog = RateLimitedCount()
    /// Files of the store that `init` found readable or writable by others and made 0600 (or could
    /// not), one line each, for the server to log as warnings (`StoreFileModes`).
    public private(set) var permissionNotes: [String] = []
    /// Frames in the WAL after the last commit (the WAL hook's count). Loop thread.
    private let walFrames = WALFrameCounter()
    /// The database's page size (a WAL frame is a page and a 24-byte header).
    private var pageSize = 4096

    /// Internal for the users' rows (`SQLiteStore+Users.swift`).
    private(set) var database: SQLiteDatabase?
    private var statements: Statements?
    private var ledger = HistoryLedger()
    /// Per object on disk: the bytes of its snapshot and of its redo rows (from `load()`, for the
    /// objects that have redo rows, and every commit). An object missing here gets a new snapshot at its
    /// next write, unless `snapshotsLoaded`: then it has no redo rows, and its snapshot's size is looked
    /// up at its first write (`storedLog`) rather than kept for every object from the load.
    private var objectLogs: [String: ObjectLog] = [:]
    /// Whether `load()` ran: every object with redo rows is in `objectLogs`, and one missing from it
    /// has at most a snapshot.
    private var snapshotsLoaded = false
    /// Whether an object missing from `objectLogs` is known to have no redo rows: after `load()`, or
    /// when the `redo` table was empty at opening (a new or just migrated database).
    private var knowsEveryRedoRow = false
    /// The revision stored in `meta`.
    private var storedRevision: UInt64 = 0
    /// The binding id counter stored in `meta` (0 when none is).
    private var storedLastBindingID: UInt64 = 0
    /// Reused encoding buffers: a commit allocates none once they have grown.
    private var valueText: [UInt8] = []
    private var changeText: [UInt8] = []

    /// The statements a commit runs, compiled once.
    private struct Statements {
        let begin: SQLiteStatement
        let commit: SQLiteStatement
        let rollback: SQLiteStatement
        let upsertObject: SQLiteStatement
        let deleteObject: SQLiteStatement
        let insertRedo: SQLiteStatement
        let deleteRedo: SQLiteStatement
        let insertHistory: SQLiteStatement
        let setRevision: SQLiteStatement
        let trimHistory: SQLiteStatement
        let upsertClass: SQLiteStatement
        let upsertBinding: SQLiteStatement
        let deleteBinding: SQLiteStatement
        let setLastBindingID: SQLiteStatement
        let setStreamSequence: SQLiteStatement
        /// The bytes of one object's snapshot (no row: the object is not stored).
        let snapshotBytes: SQLiteStatement

        init(_ database: SQLiteDatabase) throws(StorageError) {
            begin = try database.prepare("BEGIN IMMEDIATE")
            commit = try database.prepare("COMMIT")
            rollback = try database.prepare("ROLLBACK")
            upsertObject = try database.prepare(
                "INSERT INTO objects(id, value) VALUES(?1, ?2) ON CONFLICT(id) DO UPDATE SET value = excluded.value")
            deleteObject = try database.prepare("DELETE FROM objects WHERE id = ?1")
            insertRedo = try database.prepare("INSERT INTO redo(object, rev, change) VALUES(?1, ?2, ?3)")
            deleteRedo = try database.prepare("DELETE FROM redo WHERE object = ?1")
            insertHistory = try database.prepare(
                "INSERT INTO history(rev, object, change, bytes) VALUES(?1, ?2, ?3, ?4)")
            setRevision = try database.prepare(
                "INSERT INTO meta(key, value) VALUES('revision', ?1) ON CONFLICT(key) DO UPDATE SET value = excluded.value")
            trimHistory = try database.prepare("DELETE FROM history WHERE rev <= ?1")
            upsertClass = try database.prepare(
                "INSERT INTO classes(name, definition) VALUES(?1, ?2) ON CONFLICT(name) DO UPDATE SET definition = excluded.definition")
            upsertBinding = try database.prepare(
                "INSERT INTO bindings(id, definition) VALUES(?1, ?2) ON CONFLICT(id) DO UPDATE SET definition = excluded.definition")
            deleteBinding = try database.prepare("DELETE FROM bindings WHERE id = ?1")
            setLastBindingID = try database.prepare(
                "INSERT INTO meta(key, value) VALUES('last_binding_id', ?1) ON CONFLICT(key) DO UPDATE SET value = excluded.value")
            setStreamSequence = try database.prepare(
                "INSERT INTO meta(key, value) VALUES('stream_sequence', ?1) ON CONFLICT(key) DO UPDATE SET value = excluded.value")
            snapshotBytes = try database.prepare("SELECT length(CAST(value AS BLOB)) FROM objects WHERE id = ?1")
        }

        func finalize() {
            for statement in [begin, commit, rollback, upsertObject, deleteObject, insertRedo, deleteRedo, insertHistory, setRevision, trimHistory,
                              upsertClass, upsertBinding, deleteBinding, setLastBindingID, setStreamSequence, snapshotBytes] {
                statement.finalize()
            }
        }
    }

    /// Opens the store in `directory` (created with its parents when missing), creating the database on
    /// first use, and locks it for this process. Loads the size of every history row (not the rows
    /// themselves) and trims history to the limits, which may have shrunk since the last run.
    ///
    /// Throws `.locked` when another process (or another store in this process) has the directory
    /// open, `.unsupportedSchema` for a database written by a newer kvod, `.directory` when the
    /// directory cannot be created or is not writable, `.unusableDatabase` (naming the file) when the
    /// database cannot be opened or written (read-only, unreadable, an I/O error, not a database),
    /// `.missingTable` for an existing database without one of its tables (only a file with no table at
    /// all is initialised), `.corrupt` for a counter, schema version or history row out of range.
    public init(directory: String, sync: SyncMode, historyLimit: Int, historyByteLimit: Int,
                walLimitBytes: Int = SQLiteStore.defaultWALLimitBytes) throws(StorageError) {
        self.sync = sync
        self.historyLimit = max(historyLimit, 0)
        self.historyByteLimit = max(historyByteLimit, 0)
        self.walLimitBytes = max(walLimitBytes, SQLiteStore.minimumWALLimitBytes)
        try SQLiteStore.makeDirectory(directory)
        databasePath = directory.hasSuffix("/") ? directory + SQLiteStore.fileName : directory + "/" + SQLiteStore.fileName
        try SQLiteStore.checkWritable(directory: directory, databasePath: databasePath)
        guard let lock = try StoreLock(path: databasePath + ".lock") else { throw .locked(path: databasePath) }
        self.lock = lock
        StoreFileModes.createPrivately(databasePath)
        permissionNotes = StoreFileModes.tighten([databasePath, databasePath + "-wal", databasePath + "-shm", databasePath + ".lock"])
        let database: SQLiteDatabase
        do {
            database = try SQLiteDatabase(path: databasePath)
        } catch {
            throw SQLiteStore.describingOpenFailure(error, databasePath: databasePath)
        }
        do {
            try configure(database)
            try createSchema(database)
            statements = try Statements(database)
            self.database = database
            try loadLedger()
            knowsEveryRedoRow = try queryText("SELECT count(*) FROM (SELECT 1 FROM redo LIMIT 1)") == "0"
            try trimToLimits()
        } catch {
            statements?.finalize()
            statements = nil
            self.database = nil
            database.close()
            lock.release()
            throw SQLiteStore.describingOpenFailure(error, databasePath: databasePath)
        }
    }

    deinit {
        close()
    }

    /// Finalizes the statements and closes the database, which checkpoints the WAL into the database
    /// file and releases the lock. Idempotent; later calls of `load` or `commit` throw `.closed`.
    public func close() {
        // The background checkpoint's connection first: the last connection to close checkpoints the
        // WAL into the database file and removes it.
        backgroundCheckpoint?.close()
        backgroundCheckpoint = nil
        statements?.finalize()
        statements = nil
        database?.close()
        database = nil
        lock?.release()
        lock = nil
    }

    // MARK: - Checkpoints

    /// What the WAL needs after a commit.
    public enum CheckpointNeed: Equatable, Sendable {
        /// Nothing yet.
        case none
        /// A passive checkpoint off the loop thread (`afterCommit(on:)`), when none is running.
        case background
        /// The WAL is past `walLimitBytes` (only between a failed `checkpointBlocking()` and the next commit).
        case blocking
    }

    /// The blocking fallback the last `commit` ran, if it ran one: the WAL's bytes before it and whether
    /// it emptied the WAL. `commit` runs it itself when the WAL passes `walLimitBytes`, so that every
    /// user of the store (kvod, `kvod user`, kvod-bench) keeps the WAL bounded; the server logs it.
    public private(set) var blockingCheckpoint: (walBytes: Int, emptied: Bool)?

    /// The bytes of the WAL in use (its frames since the last restart), as of the last commit.
    public var walBytes: Int { walFrames.frames == 0 ? 0 : 32 + walFrames.frames * (pageSize + 24) }

    /// What the WAL needs, by its size after the last commit. Loop thread.
    public var checkpointNeed: CheckpointNeed {
        let bytes = walBytes
        if bytes > walLimitBytes { return .blocking }
        return bytes >= walCheckpointStartBytes ? .background : .none
    }

    /// The blocking fallback: checkpoints the whole WAL on this (the loop) thread and truncates it,
    /// waiting up to `blockingCheckpointWaitMilliseconds` for a running background checkpoint (or
    /// another reader) to let go. Returns whether the WAL is now empty; when not (the wait ran out), the
    /// WAL keeps its frames and commits go on: nothing is lost, and the next commit tries again.
    ///
    /// SQLite's busy handler covers the writer lock and the readers, not the checkpoint lock: while
    /// another connection checkpoints (the background `WALCheckpointJob`, copying and syncing),
    /// `wal_checkpoint(TRUNCATE)` fails at once with `SQLITE_BUSY` ("even if there is a busy-handler
    /// configured, it will not be invoked in this case", sqlite.org/c3ref/wal_checkpoint_v2.html).
    /// So this retries it every millisecond until the wait runs out.
    @discardableResult
    public func checkpointBlocking() -> Bool {
        guard let database else { return false }
        let wait = blockingCheckpointWaitMilliseconds
        database.setBusyTimeout(milliseconds: wait)
        defer { database.setBusyTimeout(milliseconds: 0) }
        let deadline = uv_hrtime() + UInt64(wait) * 1_000_000
        var result = database.checkpoint(mode: SQLITE_CHECKPOINT_TRUNCATE)
        while result.code == SQLITE_BUSY && uv_hrtime() < deadline {
            usleep(1000)
            result = database.checkpoint(mode: SQLITE_CHECKPOINT_TRUNCATE)
        }
        guard result.code == SQLITE_OK else { return false }
        walFrames.frames = 0
        return true
    }

    /// A background checkpoint job with a second connection to this store's database, for the server
    /// to queue on its loop's thread pool (`WALCheckpointJob.start`). `delayMilliseconds`: a pause before
    /// each checkpoint, for tests of the blocking fallback only.
    func makeCheckpointJob(delayMilliseconds: Int = 0) throws(StorageError) -> WALCheckpointJob {
        guard database != nil else { throw .closed }
        return try WALCheckpointJob(databasePath: databasePath, delayMilliseconds: delayMilliseconds)
    }

    // MARK: - Loading

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
    public func load() throws(StorageError) -> PersistedState {
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

        let history = try database.prepare("SELECT rev, object, change FROM history ORDER BY rev")
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
            let json = try decode(text, row: row)
            let change: RecordedChange
            do throws(ChangeDecodingError) {
                change = try RecordedChange(json: json)
            } catch {
                throw .corrupt(row: row, reason: error.reason)
            }
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
        return state
    }

    /// Reads every row of `objects` into `filler` in the table's order: each snapshot that is `JSONWriter`'s
    /// own text copied as it is, any other text parsed (a corrupt row throws `.corrupt` naming it) and
    /// encoded again.
    private func readObjectRows(_ database: SQLiteDatabase, into filler: ObjectTableFiller) throws(StorageError) {
        let objects = try database.prepare("SELECT id, value FROM objects")
        defer { objects.finalize() }
        while try objects.step() {
            // Types first: reading a column as text or as a number may convert it in place.
            let idIsText = objects.isText(0)
            let id = objects.string(0)
            guard idIsText else { throw .corrupt(row: "object '\(id)'", reason: "the id is not text") }
            let text = objects.textBytes(1)
            let packed: PackedObject
            if CanonicalObjectScan.isCanonicalObject(text) {
                packed = PackedObject.make(copying: text)
            } else {
                let value = try decode(text, row: "object '\(id)'")
                guard case let .object(members) = value else {
                    throw .corrupt(row: "object '\(id)'", reason: "the value is not a JSON object")
                }
                packed = PackedObject.make(encoding: members)
            }
            filler.add(id, packed)
        }
    }

    /// Applies every object's redo rows, in revision order, to its snapshot in `state`, checking each
    /// row (its revision within the stored revision, its object snapshotted, its change decodable and
    /// applicable) and counting its bytes in `objectLogs`.
    private func replayRedo(_ database: SQLiteDatabase, into state: inout PersistedState) throws(StorageError) {
        let redo = try database.prepare("SELECT object, rev, change FROM redo ORDER BY object, rev")
        defer { redo.finalize() }
        var currentID: String?
        var current: JSONValue?
        var snapshotBytes = 0
        var redoBytes = 0
        func finish() {
            guard let id = currentID, case let .object(members)? = current else { return }
            state.objects.setPacked(id, members: members)
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
            let text = redo.textBytes(2)
            redoBytes += text.count
            let json = try decode(text, row: row)
            let change: RecordedChange
            do throws(ChangeDecodingError) {
                change = try RecordedChange(json: json)
            } catch {
                throw .corrupt(row: row, reason: error.reason)
            }
            switch change {
            case .created, .deleted:
                throw .corrupt(row: row, reason: "a redo row cannot create or delete its object")
            case .set, .array:
                change.apply(to: &current, forward: true)
            }
        }
        finish()
    }

    /// The bytes of object `id`'s snapshot row, nil when it has none.
    private func storedSnapshotBytes(of id: String) throws(StorageError) -> Int? {
        guard let statement = statements?.snapshotBytes else { throw .closed }
        defer { statement.reset() }
        try statement.bind(1, text: id)
        guard try statement.step(), !statement.isNull(0) else { return nil }
        return Int(statement.int64(0))
    }

    /// The log of object `id`, which `objectLogs` does not hold: after `load()`, its snapshot's size (it
    /// has no redo rows) or, without a snapshot, a new object; otherwise unknown.
    private func storedLog(of id: String) throws(StorageError) -> ObjectLog {
        guard snapshotsLoaded else { return .unknown(redoMayExist: !knowsEveryRedoRow) }
        guard let bytes = try storedSnapshotBytes(of: id) else { return .unknown(redoMayExist: false) }
        return ObjectLog(snapshotBytes: bytes, redoBytes: 0)
    }

    /// A class or binding definition: JSON text that must hold an object.
    private func decodeDefinition(_ text: UnsafeBufferPointer<UInt8>, row: String) throws(StorageError) -> JSONValue {
        let definition = try decode(text, row: row)
        guard case .object = definition else { throw .corrupt(row: row, reason: "the definition is not a JSON object") }
        return definition
    }

    private func decode(_ text: UnsafeBufferPointer<UInt8>, row: String) throws(StorageError) -> JSONValue {
        do throws(JSONParseError) {
            return try JSONParser.parse(text)
        } catch {
            throw .corrupt(row: row, reason: "invalid JSON: \(error)")
        }
    }

    /// Cluster mode: the last stream sequence whose writes are stored (`meta` row `stream_sequence`,
    /// written by `commit` with them); 0 when none is.
    public func readStreamSequence() throws(StorageError) -> UInt64 {
        guard let database else { throw .closed }
        return try readCounter(database, key: "stream_sequence", what: "a stream sequence") ?? 0
    }

    /// Cluster mode: the stream this data directory belongs to (`meta` row `cluster_stream`, written by
    /// `recordClusterStream` when a cluster node first starts on it); nil for a directory no cluster node used.
    public func readClusterStream() throws(StorageError) -> String? {
        guard let database else { throw .closed }
        let query = try database.prepare("SELECT value FROM meta WHERE key = 'cluster_stream'")
        defer { query.finalize() }
        guard try query.step() else { return nil }
        return query.string(0)
    }

    /// Cluster mode: marks this data directory as the state of stream `name`, so that it is never started
    /// alone or as a node of another stream (Server checks at start-up).
    public func recordClusterStream(_ name: String) throws(StorageError) {
        guard let database else { throw .closed }
        let statement = try database.prepare(
            "INSERT INTO meta(key, value) VALUES('cluster_stream', ?1) ON CONFLICT(key) DO UPDATE SET value = excluded.value")
        defer { statement.finalize() }
        try statement.bind(1, text: name)
        _ = try statement.step()
    }

    private func readRevision(_ database: SQLiteDatabase) throws(StorageError) -> UInt64? {
        try readCounter(database, key: "revision", what: "a revision")
    }

    private func readLastBindingID(_ database: SQLiteDatabase) throws(StorageError) -> UInt64? {
        try readCounter(database, key: "last_binding_id", what: "a binding id")
    }

    /// An integer from 0 to `maximumCounter` kept in `meta` under `key` (nil when the row is missing);
    /// anything else throws `.corrupt` for row `meta <key>`, saying the value is not `what`.
    private func readCounter(_ database: SQLiteDatabase, key: String, what: String) throws(StorageError) -> UInt64? {
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

    // MARK: - Committing

    /// Writes one batch in one transaction: each object the batch touched gets its final value (or
    /// is deleted), every entry becomes a history row, each class and binding is stored (a nil binding
    /// deletes its row), `batch.revision` becomes the stored revision, the binding id counter rises to
    /// `batch.lastBindingID` (it never goes down), and history is trimmed to its limits.
    ///
    /// A batch that changes nothing and moves neither counter costs nothing. On error the transaction
    /// is rolled back and nothing of the batch is stored.
    public func commit(_ batch: CommitBatch) throws(StorageError) {
        guard let statements else { throw .closed }
        let movesRevision = batch.revision != storedRevision
        let raisesLastBindingID = batch.lastBindingID > storedLastBindingID
        if batch.entries.isEmpty && batch.objects.isEmpty && batch.classes.isEmpty && batch.bindings.isEmpty
            && batch.users.isEmpty && !movesRevision && !raisesLastBindingID && batch.streamSequence == nil { return }
        let keepHistory = historyLimit > 0
        var appended = 0
        // What this batch does to each object's log; merged into `objectLogs` once the batch is committed.
        var logs: [String: ObjectLog] = [:]
        do {
            try statements.begin.run()
            // Each change once as text: a history row, and a redo row unless its object gets a new snapshot.
            var lastObject: String?
            var lastLog = ObjectLog(snapshotBytes: 0, redoBytes: 0)
            for entry in batch.entries {
                changeText.removeAll(keepingCapacity: true)
                entry.change.writeJSON(into: &changeText)
                if keepHistory {
                    let insert = statements.insertHistory
                    try insert.bind(1, Int64(bitPattern: entry.rev))
                    try insert.bind(2, text: entry.object)
                    try insert.bind(3, text: changeText)
                    try insert.bind(4, Int64(changeText.count))
                    try insert.run()
                    ledger.append(revision: entry.rev, bytes: changeText.count)
                    appended += 1
                }
                // Runs of writes to one object (the common case) look its log up once.
                if lastObject != entry.object {
                    if let lastObject { logs[lastObject] = lastLog }
                    lastObject = entry.object
                    if let log = logs[entry.object] ?? objectLogs[entry.object] {
                        lastLog = log
                    } else {
                        lastLog = try storedLog(of: entry.object)
                    }
                }
                guard !lastLog.takesSnapshot else { continue }
                switch entry.change {
                case .created, .deleted:
                    lastLog.takesSnapshot = true
                case .set, .array:
                    if lastLog.redoBytes + changeText.count > lastLog.snapshotBytes {
                        lastLog.takesSnapshot = true
                    } else {
                        try statements.insertRedo.bind(1, text: entry.object)
                        try statements.insertRedo.bind(2, Int64(bitPattern: entry.rev))
                        try statements.insertRedo.bind(3, text: changeText)
                        try statements.insertRedo.run()
                        lastLog.redoBytes += changeText.count
                    }
                }
            }
            if let lastObject { logs[lastObject] = lastLog }
            // An object given without a write of its own (callers other than the engine) is stored whole.
            for id in batch.objects.keys where logs[id] == nil {
                var log: ObjectLog
                if let known = objectLogs[id] { log = known } else { log = try storedLog(of: id) }
                log.takesSnapshot = true
                logs[id] = log
            }
            for (id, log) in logs where log.takesSnapshot {
                guard let final = batch.objects[id] else {
                    // No final value given (only the engine's batches are complete): the rows stay as they are.
                    logs.removeValue(forKey: id)
                    continue
                }
                // The redo rows go (any written above in this batch too): the snapshot holds them.
                if log.redoBytes > 0 || log.hasUnknownRedo {
                    try statements.deleteRedo.bind(1, text: id)
                    try statements.deleteRedo.run()
                }
                switch final {
                case let .present(value):
                    valueText.removeAll(keepingCapacity: true)
                    JSONWriter.write(value, into: &valueText)
                    try statements.upsertObject.bind(1, text: id)
                    try statements.upsertObject.bind(2, text: valueText)
                    try statements.upsertObject.run()
                    logs[id] = ObjectLog(snapshotBytes: valueText.count, redoBytes: 0)
                case .deleted:
                    try statements.deleteObject.bind(1, text: id)
                    try statements.deleteObject.run()
                    logs[id] = ObjectLog(snapshotBytes: 0, redoBytes: 0, isDeleted: true)
                }
            }
            try write(classes: batch.classes, bindings: batch.bindings, statements)
            if !batch.users.isEmpty {
                let names = batch.users.keys.sorted()
                try writeUserRows(upserting: names.compactMap { batch.users[$0] ?? nil },
                                  deleting: names.filter { batch.users[$0]! == nil })
            }
            if raisesLastBindingID {
                try statements.setLastBindingID.bind(1, Int64(bitPattern: batch.lastBindingID))
                try statements.setLastBindingID.run()
            }
            if movesRevision {
                try statements.setRevision.bind(1, Int64(bitPattern: batch.revision))
                try statements.setRevision.run()
            }
            if let sequence = batch.streamSequence {
                try statements.setStreamSequence.bind(1, Int64(bitPattern: sequence))
                try statements.setStreamSequence.run()
            }
            let drop = ledger.rowsToDrop(limit: historyLimit, byteLimit: historyByteLimit)
            if drop > 0 {
                try statements.trimHistory.bind(1, Int64(bitPattern: ledger.revision(at: drop - 1)))
                try statements.trimHistory.run()
            }
            try statements.commit.run()
            ledger.removeFirst(drop)
            for (id, log) in logs {
                if log.isDeleted { objectLogs.removeValue(forKey: id) } else { objectLogs[id] = log }
            }
            storedRevision = batch.revision
            storedLastBindingID = max(storedLastBindingID, batch.lastBindingID)
        } catch {
            ledger.removeLast(appended)
            if database?.isInTransaction == true { try? statements.rollback.run() }
            throw error
        }
        blockingCheckpoint = nil
        if walBytes > walLimitBytes {
            let bytes = walBytes
            blockingCheckpoint = (bytes, checkpointBlocking())
        }
    }

    /// Upserts each class and binding definition as compact JSON and deletes each removed binding;
    /// part of `commit`'s transaction.
    private func write(classes: [String: JSONValue], bindings: [UInt64: JSONValue?],
                       _ statements: Statements) throws(StorageError) {
        for (name, definition) in classes {
            valueText.removeAll(keepingCapacity: true)
            JSONWriter.write(definition, into: &valueText)
            try statements.upsertClass.bind(1, text: name)
            try statements.upsertClass.bind(2, text: valueText)
            try statements.upsertClass.run()
        }
        for (id, definition) in bindings {
            if let definition {
                valueText.removeAll(keepingCapacity: true)
                JSONWriter.write(definition, into: &valueText)
                try statements.upsertBinding.bind(1, Int64(bitPattern: id))
                try statements.upsertBinding.bind(2, text: valueText)
                try statements.upsertBinding.run()
            } else {
                try statements.deleteBinding.bind(1, Int64(bitPattern: id))
                try statements.deleteBinding.run()
            }
        }
    }

    // MARK: - Diagnostics

    /// History rows on disk and their total `bytes`, as the store tracks them in memory.
    var historyRowCount: Int { ledger.count }
    var historyByteTotal: Int { ledger.totalBytes }

    /// The value of `PRAGMA <name>` on the store's connection (`synchronous` reads "2", "1" or "0").
    func pragma(_ name: String) throws(StorageError) -> String {
        try queryText("PRAGMA \(name)")
    }

    /// The first column of the first row of `sql` on the store's connection, as text ("" for none).
    func queryText(_ sql: String) throws(StorageError) -> String {
        guard let database else { throw .closed }
        let query = try database.prepare(sql)
        defer { query.finalize() }
        return try query.step() ? query.string(0) : ""
    }

    // MARK: - Opening

    private func configure(_ database: SQLiteDatabase) throws(StorageError) {
        // Normal locking (the directory's lock is `StoreLock`): the background checkpoint's second
        // connection shares the WAL index (the -shm file).
        try database.exec("PRAGMA busy_timeout = 0")
        let journal = try database.prepare("PRAGMA journal_mode = WAL")
        defer { journal.finalize() }
        let mode = try journal.step() ? journal.string(0).lowercased() : ""
        guard mode == "wal" else {
            throw .sqlite(code: SQLITE_ERROR, message: "journal mode is '\(mode)', not 'wal'",
                          during: "switching '\(databasePath)' to WAL")
        }
        try database.exec("PRAGMA synchronous = \(sync.pragmaValue)")
        try database.exec("PRAGMA journal_size_limit = \(SQLiteStore.walSizeLimit)")
        // No automatic checkpoint inside a commit: the hook only counts the WAL's frames (`checkpointNeed`).
        database.countWALFrames(into: walFrames)
        let pageSizeQuery = try database.prepare("PRAGMA page_size")
        defer { pageSizeQuery.finalize() }
        if try pageSizeQuery.step(), let size = Int(pageSizeQuery.string(0)), size > 0 { pageSize = size }
    }

    /// Creates the tables of a new database, migrates an older one (version 1: adds `classes` and
    /// `bindings`), records the current schema version, and refuses a newer one. Runs in one write
    /// transaction, which also takes the exclusive lock: a failed migration leaves the file as it was.
    private func createSchema(_ database: SQLiteDatabase) throws(StorageError) {
        try database.exec("BEGIN IMMEDIATE")
        do throws(StorageError) {
            let tables = try tableNames(database)
            // Only a file without any table is new; anything else must be a whole kvod database.
            if !tables.isEmpty {
                guard tables.contains("meta") else { throw .missingTable(path: databasePath, table: "meta") }
                let version = try database.prepare("SELECT value FROM meta WHERE key = 'schema_version'")
                defer { version.finalize() }
                guard try version.step() else {
                    throw .corrupt(row: "meta schema_version", reason: "the row is missing")
                }
                let isInteger = version.isInteger(0)
                let found = version.int64(0)
                if !isInteger || found < 1 {
                    throw .corrupt(row: "meta schema_version", reason: "'\(version.string(0))' is not a schema version")
                }
                if found > SQLiteStore.schemaVersion {
                    throw .unsupportedSchema(path: databasePath, found: found, supported: SQLiteStore.schemaVersion)
                }
                // Older versions lack tables that the migration below adds.
                let expected = SQLiteStore.requiredTables(ofVersion: found)
                for table in expected where !tables.contains(table) {
                    throw .missingTable(path: databasePath, table: table)
                }
            }
            // Every version only added tables, so creating the missing ones and then recording the
            // current version is the whole migration.
            try database.exec("""
                CREATE TABLE IF NOT EXISTS objects(id TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS history(rev INTEGER PRIMARY KEY, object TEXT NOT NULL, change TEXT NOT NULL,
                                                   bytes INTEGER NOT NULL);
                CREATE TABLE IF NOT EXISTS classes(name TEXT PRIMARY KEY, definition TEXT NOT NULL);
                CREATE TABLE IF NOT EXISTS bindings(id INTEGER PRIMARY KEY, definition TEXT NOT NULL);
                CREATE TABLE IF NOT EXISTS redo(object TEXT NOT NULL, rev INTEGER NOT NULL, change TEXT NOT NULL,
                                                PRIMARY KEY(object, rev)) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS users(name TEXT PRIMARY KEY, record TEXT NOT NULL) WITHOUT ROWID;
                INSERT OR IGNORE INTO meta(key, value) VALUES('schema_version', \(SQLiteStore.schemaVersion));
                UPDATE meta SET value = \(SQLiteStore.schemaVersion)
                    WHERE key = 'schema_version' AND value < \(SQLiteStore.schemaVersion);
                """)
            try database.exec("COMMIT")
        } catch {
            if database.isInTransaction { try? database.exec("ROLLBACK") }
            throw error
        }
    }

    /// The names of the tables in the database.
    private func tableNames(_ database: SQLiteDatabase) throws(StorageError) -> Set<String> {
        let query = try database.prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
        defer { query.finalize() }
        var names = Set<String>()
        while try query.step() { names.insert(query.string(0)) }
        return names
    }

    /// Reads the stored counters and the revision and size of every history row, checking that each is
    /// in range (`.corrupt` naming the row otherwise).
    private func loadLedger() throws(StorageError) {
        guard let database else { throw .closed }
        storedRevision = try readRevision(database) ?? 0
        storedLastBindingID = try readLastBindingID(database) ?? 0
        let rows = try database.prepare("SELECT rev, bytes FROM history ORDER BY rev")
        defer { rows.finalize() }
        while try rows.step() {
            let revIsInteger = rows.isInteger(0)
            let bytesAreInteger = rows.isInteger(1)
            let rev = rows.int64(0)
            let bytes = rows.int64(1)
            guard revIsInteger, rev >= 1, UInt64(rev) <= storedRevision else {
                throw .corrupt(row: "history rev \(rows.string(0))",
                               reason: "the revision is not an integer from 1 to the stored revision \(storedRevision)")
            }
            guard bytesAreInteger, (0...SQLiteStore.maximumHistoryRowBytes).contains(bytes) else {
                throw .corrupt(row: "history rev \(rev)",
                               reason: "bytes '\(rows.string(1))' is not an integer from 0 to \(SQLiteStore.maximumHistoryRowBytes)")
            }
            ledger.append(revision: UInt64(rev), bytes: Int(bytes))
        }
    }

    /// Drops the oldest history rows past the limits (they may be lower than when the rows were written).
    private func trimToLimits() throws(StorageError) {
        guard let database else { throw .closed }
        let drop = ledger.rowsToDrop(limit: historyLimit, byteLimit: historyByteLimit)
        guard drop > 0 else { return }
        let trim = try database.prepare("DELETE FROM history WHERE rev <= ?1")
        defer { trim.finalize() }
        try trim.bind(1, Int64(bitPattern: ledger.revision(at: drop - 1)))
        try trim.run()
        ledger.removeFirst(drop)
    }

    /// Names the file in what went wrong while opening: `SQLITE_BUSY` means another connection holds
    /// the lock; a read-only file, an I/O error, a full disk, a file that cannot be opened or is not a
    /// database become `.unusableDatabase` saying so in words (SQLite's own message, "disk I/O error",
    /// names neither the file nor the likely cause).
    static func describingOpenFailure(_ error: StorageError, databasePath: String) -> StorageError {
        guard case let .sqlite(code, message, during) = error else { return error }
        let detail = "SQLite error \(code) while \(during): \(message)"
        switch code & 0xFF {
        case SQLITE_BUSY:
            return .locked(path: databasePath)
        case SQLITE_READONLY, SQLITE_PERM:
            return .unusableDatabase(path: databasePath, reason: "it cannot be written: check the permissions of the file and its directory, and that the file system is not read-only (\(detail))")
        case SQLITE_CANTOPEN:
            return .unusableDatabase(path: databasePath, reason: "it cannot be opened: check that its directory exists and is writable (\(detail))")
        case SQLITE_IOERR:
            return .unusableDatabase(path: databasePath, reason: "reading or writing it failed: is the file system read-only, full or failing? (\(detail))")
        case SQLITE_FULL:
            return .unusableDatabase(path: databasePath, reason: "the disk is full (\(detail))")
        case SQLITE_NOTADB:
            return .unusableDatabase(path: databasePath, reason: "it is not a SQLite database: move it away or point --data elsewhere (\(detail))")
        default:
            return error
        }
    }

    // MARK: - Directory

    /// Refuses a data directory that this process cannot write, or an existing database file it cannot
    /// read and write, before SQLite tries and reports only "disk I/O error" or "attempt to write a
    /// readonly database". `access(2)` answers for this process's credentials and also reports a
    /// read-only file system (`EROFS`) and an immutable file (`EPERM`), even for root.
    static func checkWritable(directory: String, databasePath: String) throws(StorageError) {
        if access(directory, W_OK | X_OK) != 0 {
            let reason = String(cString: strerror(errno))
            throw .directory(path: directory, reason: "it is not writable (\(reason)): kvod creates \(fileName) and its -wal file there")
        }
        if access(databasePath, F_OK) == 0, access(databasePath, R_OK | W_OK) != 0 {
            let reason = String(cString: strerror(errno))
            throw .unusableDatabase(path: databasePath, reason: "it cannot be read and written (\(reason))")
        }
    }

    /// `mkdir -p`: creates `path` (mode 0700: `StoreFileModes`) and its missing parents (mode 0777 less
    /// the umask).
    static func makeDirectory(_ path: String) throws(StorageError) {
        guard !path.isEmpty else { throw .directory(path: path, reason: "the path is empty") }
        var prefix = path.hasPrefix("/") ? "/" : ""
        let components = path.split(separator: "/", omittingEmptySubsequences: true)
        for (index, component) in components.enumerated() {
            prefix += component
            if mkdir(prefix, index == components.count - 1 ? StoreFileModes.directoryMode : 0o777) != 0 {
                let code = errno
                guard code == EEXIST else {
                    throw .directory(path: path, reason: "mkdir '\(prefix)': \(String(cString: strerror(code)))")
                }
            }
            var info = stat()
            guard stat(prefix, &info) == 0 else {
                throw .directory(path: path, reason: "stat '\(prefix)': \(String(cString: strerror(errno)))")
            }
            guard info.st_mode & S_IFMT == S_IFDIR else {
                throw .directory(path: path, reason: "'\(prefix)' exists and is not a directory")
            }
            prefix += "/"
        }
    }
}

// MARK: - Cluster snapshots

extension SQLiteStore {
    /// Cluster mode: replaces everything stored (objects, redo rows, history, classes, bindings, the
    /// counters) by `state`, and records `streamSequence` as applied, in one transaction: a node installing
    /// a snapshot (`SnapshotBootstrap`). History is emptied (the snapshot carries none). `users`, when
    /// given (a snapshot of engine version 3 or later), replace the stored users. On error nothing
    /// changes.
    public func replaceAll(with state: PersistedState, streamSequence: UInt64, users: [UserRecord]? = nil) throws(StorageError) {
        guard let database, let statements else { throw .closed }
        var logs: [String: ObjectLog] = [:]
        do {
            try statements.begin.run()
            try database.exec("DELETE FROM objects; DELETE FROM redo; DELETE FROM history; DELETE FROM classes; DELETE FROM bindings")
            for id in state.objects.keys.sorted() {
                valueText.removeAll(keepingCapacity: true)
                JSONWriter.write(state.objects[id]!, into: &valueText)
                try statements.upsertObject.bind(1, text: id)
                try statements.upsertObject.bind(2, text: valueText)
                try statements.upsertObject.run()
                logs[id] = ObjectLog(snapshotBytes: valueText.count, redoBytes: 0)
            }
            try write(classes: state.classes, bindings: state.bindings.mapValues { Optional($0) }, statements)
            try statements.setLastBindingID.bind(1, Int64(bitPattern: state.lastBindingID))
            try statements.setLastBindingID.run()
            try statements.setRevision.bind(1, Int64(bitPattern: state.revision))
            try statements.setRevision.run()
            try statements.setStreamSequence.bind(1, Int64(bitPattern: streamSequence))
            try statements.setStreamSequence.run()
            if let users {
                try database.exec("DELETE FROM users")
                try writeUserRows(upserting: users, deleting: [])
            }
            try statements.commit.run()
        } catch {
            if database.isInTransaction { try? statements.rollback.run() }
            throw error
        }
        ledger = HistoryLedger()
        objectLogs = logs
        knowsEveryRedoRow = true
        storedRevision = state.revision
        storedLastBindingID = state.lastBindingID
    }
}
