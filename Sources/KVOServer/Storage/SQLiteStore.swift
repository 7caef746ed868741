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
/// On disk (schema version 6):
///
///     objects(id TEXT PRIMARY KEY, value TEXT NOT NULL,
///             rev INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID             -- a snapshot, as compact JSON, and the
///                                                                       -- revision of the object's last change then
///     redo(object TEXT NOT NULL, rev INTEGER NOT NULL, change TEXT NOT NULL,
///          PRIMARY KEY(object, rev)) WITHOUT ROWID                      -- the changes since the snapshot (an
///                                                                       -- object written twice in one batch
///                                                                       -- gets a snapshot instead)
///     meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID                   -- schema_version, revision, last_binding_id, stream_sequence, stream_integrity and cluster_stream (cluster)
///     history(seq INTEGER PRIMARY KEY, rev INTEGER NOT NULL,             -- oldest first; a batch's rows
///             object TEXT NOT NULL, change TEXT NOT NULL, bytes INTEGER NOT NULL)  -- share its revision
///     classes(name TEXT PRIMARY KEY, definition TEXT NOT NULL)          -- the definition as compact JSON
///     bindings(id INTEGER PRIMARY KEY, definition TEXT NOT NULL)        -- the definition as compact JSON
///     users(name TEXT PRIMARY KEY, record TEXT NOT NULL) WITHOUT ROWID  -- `UserRecord.json`, compact
///
/// Version 2 added `classes`, `bindings` and `meta.last_binding_id`; version 3 added `redo`; version 4
/// added `users` (written by `kvod user` and the admin operations, not by commits); version 5 added
/// `objects.rev` (what `ifRev` compares; an object's last change is its last redo row's revision, or its
/// snapshot's `rev` without one). An older database is migrated in place when opened: the new tables and
/// column are created and the version bumped in one transaction (the existing rows are untouched: an object
/// row of an older version is a snapshot with no changes after it, whose last change is unknown, 0, until it
/// is written again; a missing `last_binding_id` reads as 0). Version 6 keys history by `seq`, so that a batch's
/// rows can share their revision: the rows of an older version are copied with `seq` = `rev`.
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
package final class SQLiteStore {
    /// The schema this version writes and reads. A database with a newer one is refused. Version 9 added
    /// no table: its history rows may hold `{"expired":…}` changes, which a kvod of version 8 could not read.
    package static let schemaVersion: Int64 = 9
    /// The database file's name inside the data directory.
    package static let fileName = "kvod.sqlite3"
    /// The data directory's marker file's name (`DataDirectoryMarker`).
    package static let markerFileName = DataDirectoryMarker.fileName
    /// Cap on the `-wal` file kept after a checkpoint (SQLite's `journal_size_limit`), so one large
    /// commit does not leave a large WAL behind.
    static let walSizeLimit = 64 << 20
    /// The default `walLimitBytes` (`kvod --wal-limit`).
    package static let defaultWALLimitBytes = StorageConfiguration.defaultWALLimitBytes
    /// The smallest `walLimitBytes` accepted (smaller values are raised to it).
    package static let minimumWALLimitBytes = 64 << 10
    /// How long a blocking checkpoint waits for the checkpoint lock (the background checkpoint's).
    static let blockingCheckpointTimeoutMilliseconds: Int32 = 10_000
    /// How long a blocking checkpoint waits for readers: another process's read transaction (`kvod backup`'s
    /// copy, a `sqlite3` shell) may last minutes, and waiting for it would stall the event loop as long.
    static let blockingCheckpointReaderWaitMilliseconds: Int32 = 100
    /// After readers held a blocking checkpoint back, how long commits go without trying again (the WAL
    /// grows past `walLimitBytes` meanwhile, as it must while a reader needs its frames).
    static let blockingCheckpointReaderBackoffNanoseconds: UInt64 = 1_000_000_000
    /// The largest revision or binding id a database may hold (`KVOEngine.maximumCounter`, 2^62, which
    /// the engine never passes): a larger stored value is a damaged row, refused when the store opens.
    package static let maximumCounter = Int64(KVOEngine.maximumCounter)
    /// The largest `history.bytes` a row may claim (SQLite's own maximum text length is 1 GB).
    static let maximumHistoryRowBytes: Int64 = Int64(Int32.max)
    /// The tables every database of the current schema has, in the order they are checked.
    static let requiredTables = ["meta", "objects", "history", "classes", "bindings", "redo", "users", "expiries", "sessions"]

    /// The tables a database of schema `version` has (version 1: no classes or bindings; 2: no redo).
    static func requiredTables(ofVersion version: Int64) -> [String] {
        switch version {
        case 1: return ["meta", "objects", "history"]
        case 2: return ["meta", "objects", "history", "classes", "bindings"]
        case 3: return ["meta", "objects", "history", "classes", "bindings", "redo"]
        case 4, 5, 6: return ["meta", "objects", "history", "classes", "bindings", "redo", "users"]
        case 7: return ["meta", "objects", "history", "classes", "bindings", "redo", "users", "expiries"]
        // 9 added no table (only a change kind in history rows).
        default: return requiredTables
        }
    }

    /// `<directory>/kvod.sqlite3`.
    package let databasePath: String
    package let sync: SyncMode
    package let historyLimit: Int
    package let historyByteLimit: Int
    /// The WAL's hard bound in bytes: past it, `checkpointNeed` is `.blocking`.
    package let walLimitBytes: Int
    /// Where a background checkpoint starts: 1/16 of `walLimitBytes` (4 MiB by default, SQLite's own
    /// automatic checkpoint point).
    package var walCheckpointStartBytes: Int { walLimitBytes / 16 }
    /// How long `checkpointBlocking()` waits for the locks it needs: `blockingCheckpointTimeoutMilliseconds`,
    /// shorter only in tests of a wait that runs out.
    var blockingCheckpointWaitMilliseconds = SQLiteStore.blockingCheckpointTimeoutMilliseconds
    /// Until when (`clock.nanoseconds`) `checkpointBlocking()` does not try again, after readers held it back.
    var blockingCheckpointPausedUntil: UInt64 = 0
    /// The clock the pause after readers and the report's rate window are counted on: the server's (`ServerClock`,
    /// set by the server that opened it), the system's otherwise. The waits for SQLite's locks within one
    /// checkpoint stay on real time (another thread or process holds them).
    var clock = ServerClock.system()
    /// Whether readers held the last blocking checkpoint back (or it was skipped during the pause after).
    package internal(set) var blockingCheckpointHeldByReaders = false
    /// The data directory's lock, held until `close()`.
    var lock: StoreLock?
    /// The server's store only (`startBackgroundCheckpoints`): the passive checkpoint on the thread pool,
    /// queued by `afterCommit(on:)`; its own connection, owned as `WALCheckpointJob` says. Nil otherwise.
    var backgroundCheckpoint: WALCheckpointJob?
    /// Blocking checkpoints (the WAL past `walLimitBytes`), reported by `afterCommit(on:)` at most once a
    /// second, the rest counted.
    var blockingCheckpointLog = RateLimitedCount()
    /// What `init` changed for the server to log as warnings, one line each: the lost database `--init`
    /// replaced (`LostDatabaseCheck`), and files of the store it found readable or writable by others and
    /// made 0600, or could not (`StoreFileModes`). The `Store`'s `openingNotes`.
    package internal(set) var openingNotes: [String] = []
    /// Frames in the WAL after the last commit (the WAL hook's count). Loop thread.
    let walFrames = WALFrameCounter()
    /// The database's page size (a WAL frame is a page and a 24-byte header).
    var pageSize = 4096

    /// Internal for the users' rows (`SQLiteStore+Users.swift`).
    var database: SQLiteDatabase?
    var statements: Statements?
    var ledger = HistoryLedger()
    /// Per object on disk: the bytes of its snapshot and of its redo rows (from `load()`, for the
    /// objects that have redo rows, and every commit). An object missing here gets a new snapshot at its
    /// next write, unless `snapshotsLoaded`: then it has no redo rows, and its snapshot's size is looked
    /// up at its first write (`storedLog`) rather than kept for every object from the load.
    var objectLogs: [String: ObjectLog] = [:]
    /// Whether `load()` ran: every object with redo rows is in `objectLogs`, and one missing from it
    /// has at most a snapshot.
    var snapshotsLoaded = false
    /// Whether an object missing from `objectLogs` is known to have no redo rows: after `load()`, or
    /// when the `redo` table was empty at opening (a new or just migrated database).
    var knowsEveryRedoRow = false
    /// The revision stored in `meta`.
    var storedRevision: UInt64 = 0
    /// The binding id counter stored in `meta` (0 when none is).
    var storedLastBindingID: UInt64 = 0
    /// The server's store only (`startReserve`): the space held back for a full disk (`--disk-reserve`).
    var reserve: DiskReserve?
    /// The database file's device and inode when it was opened: `filesProblem()` compares its path's with
    /// them to notice the file deleted or replaced under the store.
    var openedFile: FileIdentity?
    /// The `-wal` and `-shm` files SQLite opened with the database (it keeps both open, and the same files,
    /// until `close()`): what `close()` may set aside when the database file was lost (`SQLiteStore+LostFiles`).
    var openedLog: FileIdentity?
    var openedIndex: FileIdentity?
    /// The data directory.
    let directory: String
    /// What `close()` did for the server to log as warnings, one line each: the write-ahead log it set aside
    /// because the database file was deleted or replaced (`SQLiteStore+LostFiles`). Empty otherwise.
    package internal(set) var closingNotes: [String] = []
    /// Reused encoding buffers: a commit allocates none once they have grown.
    var valueText: [UInt8] = []
    var changeText: [UInt8] = []

    /// The statements a commit runs, compiled once.
    struct Statements {
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
        let setStreamIntegrity: SQLiteStatement
        let upsertExpiry: SQLiteStatement
        let deleteExpiry: SQLiteStatement
        let upsertSession: SQLiteStatement
        let deleteSession: SQLiteStatement
        /// The bytes of one object's snapshot (no row: the object is not stored).
        let snapshotBytes: SQLiteStatement

        init(_ database: SQLiteDatabase) throws(StorageError) {
            begin = try database.prepare("BEGIN IMMEDIATE")
            commit = try database.prepare("COMMIT")
            rollback = try database.prepare("ROLLBACK")
            upsertObject = try database.prepare(
                "INSERT INTO objects(id, value, rev) VALUES(?1, ?2, ?3) ON CONFLICT(id) DO UPDATE SET value = excluded.value, rev = excluded.rev")
            deleteObject = try database.prepare("DELETE FROM objects WHERE id = ?1")
            insertRedo = try database.prepare("INSERT INTO redo(object, rev, change) VALUES(?1, ?2, ?3)")
            deleteRedo = try database.prepare("DELETE FROM redo WHERE object = ?1")
            insertHistory = try database.prepare(
                "INSERT INTO history(rev, object, change, bytes, seq) VALUES(?1, ?2, ?3, ?4, ?5)")
            setRevision = try database.prepare(
                "INSERT INTO meta(key, value) VALUES('revision', ?1) ON CONFLICT(key) DO UPDATE SET value = excluded.value")
            trimHistory = try database.prepare("DELETE FROM history WHERE seq <= ?1")
            upsertClass = try database.prepare(
                "INSERT INTO classes(name, definition) VALUES(?1, ?2) ON CONFLICT(name) DO UPDATE SET definition = excluded.definition")
            upsertBinding = try database.prepare(
                "INSERT INTO bindings(id, definition) VALUES(?1, ?2) ON CONFLICT(id) DO UPDATE SET definition = excluded.definition")
            deleteBinding = try database.prepare("DELETE FROM bindings WHERE id = ?1")
            setLastBindingID = try database.prepare(
                "INSERT INTO meta(key, value) VALUES('last_binding_id', ?1) ON CONFLICT(key) DO UPDATE SET value = excluded.value")
            setStreamSequence = try database.prepare(
                "INSERT INTO meta(key, value) VALUES('stream_sequence', ?1) ON CONFLICT(key) DO UPDATE SET value = excluded.value")
            setStreamIntegrity = try database.prepare(
                "INSERT INTO meta(key, value) VALUES('stream_integrity', ?1) ON CONFLICT(key) DO UPDATE SET value = excluded.value")
            upsertExpiry = try database.prepare(
                "INSERT INTO expiries(object, ttl, deadline) VALUES(?1, ?2, ?3) ON CONFLICT(object) DO UPDATE SET ttl = excluded.ttl, deadline = excluded.deadline")
            deleteExpiry = try database.prepare("DELETE FROM expiries WHERE object = ?1")
            upsertSession = try database.prepare(
                "INSERT INTO sessions(id, record) VALUES(?1, ?2) ON CONFLICT(id) DO UPDATE SET record = excluded.record")
            deleteSession = try database.prepare("DELETE FROM sessions WHERE id = ?1")
            snapshotBytes = try database.prepare("SELECT length(CAST(value AS BLOB)) FROM objects WHERE id = ?1")
        }

        func finalize() {
            for statement in [begin, commit, rollback, upsertObject, deleteObject, insertRedo, deleteRedo, insertHistory, setRevision, trimHistory,
                              upsertClass, upsertBinding, deleteBinding, setLastBindingID, setStreamSequence, setStreamIntegrity, upsertExpiry, deleteExpiry, upsertSession, deleteSession, snapshotBytes] {
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
    /// all is initialised), `.corrupt` for a counter, schema version or history row out of range, and
    /// `.lostDatabase` when the database file is missing or empty in a directory that held one
    /// (`LostDatabaseCheck`), unless `replacesLostDatabase` (`--init`): then a new, empty database replaces
    /// it, said in `openingNotes`. A `-wal` written for another database file is set aside before SQLite opens
    /// the database (`ForeignLogCheck`), said in `openingNotes` too. Writes the directory's marker
    /// (`DataDirectoryMarker`) once the database is open, with the files it has open.
    package init(directory: String, sync: SyncMode, historyLimit: Int, historyByteLimit: Int,
                walLimitBytes: Int = SQLiteStore.defaultWALLimitBytes, replacesLostDatabase: Bool = false) throws(StorageError) {
        self.sync = sync
        self.historyLimit = max(historyLimit, 0)
        self.historyByteLimit = max(historyByteLimit, 0)
        self.walLimitBytes = max(walLimitBytes, SQLiteStore.minimumWALLimitBytes)
        try SQLiteStore.makeDirectory(directory)
        self.directory = directory
        databasePath = SQLiteStore.databasePath(inDirectory: directory)
        try SQLiteStore.checkWritable(directory: directory, databasePath: databasePath)
        guard let lock = try StoreLock(path: databasePath + ".lock") else { throw .locked(path: databasePath) }
        self.lock = lock
        // Under the lock: another kvod that held it has finished writing.
        let loss = LostDatabaseCheck(directory: directory, databasePath: databasePath)
        var lossNotes: [String] = []
        let marker = DataDirectoryMarker.load(inDirectory: directory)
        do throws(StorageError) {
            if let refusal = loss.refusal {
                guard replacesLostDatabase else { throw refusal }
                lossNotes = try loss.setAsideLeftovers()
            } else {
                // Before SQLite opens the file: never apply a log written for another database file.
                lossNotes = try ForeignLogCheck.setAsideForeignLog(databasePath: databasePath, marker: marker)
            }
        } catch {
            lock.release()
            throw error
        }
        StoreFileModes.createPrivately(databasePath)
        openingNotes = lossNotes
            + StoreFileModes.tighten([databasePath, databasePath + "-wal", databasePath + "-shm", databasePath + ".lock"])
        let database: SQLiteDatabase
        do {
            database = try SQLiteDatabase(path: databasePath)
        } catch {
            throw SQLiteStore.describingOpenFailure(error, databasePath: databasePath)
        }
        do {
            // Before `configure`: switching to WAL writes the header, after which the mode takes a VACUUM.
            try SQLiteStore.prepareIncrementalVacuum(database)
            try configure(database)
            try createSchema(database)
            if let note = switchToIncrementalVacuum(database) { openingNotes.append(note) }
            statements = try Statements(database)
            self.database = database
            try loadLedger()
            knowsEveryRedoRow = try queryText("SELECT count(*) FROM (SELECT 1 FROM redo LIMIT 1)") == "0"
            try trimToLimits()
            try recordOpenedFiles(marker: loss.isLost || !DataDirectoryMarker.exists(inDirectory: directory) ? nil : marker)
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

    /// The database file of the data directory `directory`.
    package static func databasePath(inDirectory directory: String) -> String {
        directory.hasSuffix("/") ? directory + fileName : directory + "/" + fileName
    }

    /// Finalizes the statements and closes the database, which checkpoints the WAL into the database
    /// file and releases the lock. When the database file was deleted or replaced (`filesProblem()`), SQLite
    /// leaves the WAL (and `-shm`) at their paths, beside whatever file is there now: this store's own are
    /// set aside first (`setAsideOwnLogs`, said in `closingNotes`). After a clean close, the marker records
    /// that no log is left. Idempotent; later calls of `load` or `commit` throw `.closed`.
    package func close() {
        let wasOpen = database != nil
        // While SQLite still holds the files open (their inodes cannot be reused): which are this store's.
        let problem = wasOpen ? filesProblem() : nil
        if let problem { closingNotes = setAsideOwnLogs(because: problem) }
        // The background checkpoint's connection first: the last connection to close checkpoints the
        // WAL into the database file and removes it.
        backgroundCheckpoint?.close()
        backgroundCheckpoint = nil
        statements?.finalize()
        statements = nil
        database?.close()
        database = nil
        if wasOpen, problem == nil, let note = recordLogRemoved() { closingNotes.append(note) }
        lock?.release()
        lock = nil
    }

    // MARK: - Checkpoints

    /// What the WAL needs after a commit.
    package enum CheckpointNeed: Equatable, Sendable {
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
    package internal(set) var blockingCheckpoint: (walBytes: Int, emptied: Bool)?

    /// The bytes of the WAL in use (its frames since the last restart), as of the last commit.
    package var walBytes: Int { walFrames.frames == 0 ? 0 : 32 + walFrames.frames * (pageSize + 24) }

    /// What the WAL needs, by its size after the last commit. Loop thread.
    package var checkpointNeed: CheckpointNeed {
        let bytes = walBytes
        if bytes > walLimitBytes { return .blocking }
        return bytes >= walCheckpointStartBytes ? .background : .none
    }

    /// The blocking fallback: checkpoints the whole WAL on this (the loop) thread and truncates it,
    /// waiting up to `blockingCheckpointWaitMilliseconds` for a running background checkpoint to let go,
    /// and up to `blockingCheckpointReaderWaitMilliseconds` for readers. Returns whether the WAL is now
    /// empty; when not, the WAL keeps its frames and commits go on: nothing is lost, and a later commit
    /// tries again (the next one; after readers held it back, the first one a second later).
    ///
    /// SQLite's busy handler covers the writer lock and the readers, not the checkpoint lock: while
    /// another connection checkpoints (the background `WALCheckpointJob`, copying and syncing),
    /// `wal_checkpoint(TRUNCATE)` fails at once with `SQLITE_BUSY` ("even if there is a busy-handler
    /// configured, it will not be invoked in this case", sqlite.org/c3ref/wal_checkpoint_v2.html).
    /// So this retries it every millisecond until the wait runs out. A `SQLITE_BUSY` that comes back only
    /// after the busy handler's whole wait is readers (kvod is the only writer): another process's read
    /// transaction, such as `kvod backup`'s, which may last minutes. That one is not waited for.
    @discardableResult
    package func checkpointBlocking() -> Bool {
        guard let database else { return false }
        if clock.nanoseconds < blockingCheckpointPausedUntil { return false }
        blockingCheckpointHeldByReaders = false
        let wait = blockingCheckpointWaitMilliseconds
        let readerWait = min(wait, SQLiteStore.blockingCheckpointReaderWaitMilliseconds)
        database.setBusyTimeout(milliseconds: readerWait)
        defer { database.setBusyTimeout(milliseconds: 0) }
        let deadline = uv_hrtime() + UInt64(wait) * 1_000_000
        while true {
            let started = uv_hrtime()
            let result = database.checkpoint(mode: SQLITE_CHECKPOINT_TRUNCATE)
            if result.code == SQLITE_OK {
                walFrames.frames = 0
                return true
            }
            guard result.code == SQLITE_BUSY else { return false }
            let now = uv_hrtime()
            if now - started >= UInt64(readerWait) * 1_000_000 {
                blockingCheckpointHeldByReaders = true
                blockingCheckpointPausedUntil = clock.nanoseconds + SQLiteStore.blockingCheckpointReaderBackoffNanoseconds
                return false
            }
            if now >= deadline { return false }
            usleep(1000)
        }
    }

    /// A background checkpoint job with a second connection to this store's database, for the server
    /// to queue on its loop's thread pool (`WALCheckpointJob.start`). `delayMilliseconds`: a pause before
    /// each checkpoint, for tests of the blocking fallback only.
    func makeCheckpointJob(delayMilliseconds: Int = 0) throws(StorageError) -> WALCheckpointJob {
        guard database != nil else { throw .closed }
        return try WALCheckpointJob(databasePath: databasePath, delayMilliseconds: delayMilliseconds)
    }
}

// MARK: - Cluster snapshots

extension SQLiteStore {
    /// Cluster mode: replaces everything stored (objects, redo rows, history, classes, bindings, the
    /// counters) by `state`, and records `streamSequence` as applied, in one transaction: a node installing
    /// a snapshot (`SnapshotBootstrap`). History is emptied (the snapshot carries none). `users`, when
    /// given (a snapshot of engine version 3 or later), replace the stored users, and `sessions`, when given
    /// (version 5 or later), the stored sessions. On error nothing changes.
    package func replaceAll(with state: PersistedState, streamSequence: UInt64, streamIntegrity: [UInt8]? = nil,
                            users: [UserRecord]? = nil, sessions: [String: JSONValue]? = nil) throws(StorageError) {
        guard let database, let statements else { throw .closed }
        var logs: [String: ObjectLog] = [:]
        do {
            try statements.begin.run()
            try database.exec("DELETE FROM objects; DELETE FROM redo; DELETE FROM history; DELETE FROM classes; DELETE FROM bindings; DELETE FROM expiries")
            for id in state.objects.keys.sorted() {
                valueText.removeAll(keepingCapacity: true)
                JSONWriter.write(state.objects[id]!, into: &valueText)
                try statements.upsertObject.bind(1, text: id)
                try statements.upsertObject.bind(2, text: valueText)
                try statements.upsertObject.bind(3, Int64(bitPattern: state.objects.changedRevision(of: id) ?? 0))
                try statements.upsertObject.run()
                logs[id] = ObjectLog(snapshotBytes: valueText.count, redoBytes: 0)
            }
            try write(classes: state.classes, bindings: state.bindings.mapValues { Optional($0) }, statements)
            for (object, expiry) in state.expiries {
                try statements.upsertExpiry.bind(1, text: object)
                try statements.upsertExpiry.bind(2, expiry.ttl)
                try statements.upsertExpiry.bind(3, expiry.deadline)
                try statements.upsertExpiry.run()
            }
            try statements.setLastBindingID.bind(1, Int64(bitPattern: state.lastBindingID))
            try statements.setLastBindingID.run()
            try statements.setRevision.bind(1, Int64(bitPattern: state.revision))
            try statements.setRevision.run()
            try statements.setStreamSequence.bind(1, Int64(bitPattern: streamSequence))
            try statements.setStreamSequence.run()
            if let streamIntegrity {
                try statements.setStreamIntegrity.bind(1, text: streamIntegrity)
                try statements.setStreamIntegrity.run()
            } else {
                try database.exec("DELETE FROM meta WHERE key = 'stream_integrity'")
            }
            if let users {
                try database.exec("DELETE FROM users")
                try writeUserRows(upserting: users, deleting: [])
            }
            // A snapshot of engine version 5 or later: the replicated presence sessions, with the sequence.
            if let sessions {
                try database.exec("DELETE FROM sessions")
                for id in sessions.keys.sorted() {
                    try statements.upsertSession.bind(1, text: id)
                    try statements.upsertSession.bind(2, text: JSONWriter.bytes(sessions[id]!))
                    try statements.upsertSession.run()
                }
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
