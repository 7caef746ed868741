import CSQLite
import KVOEngine
import KVOModel

/// One open SQLite connection: open, run SQL text, prepare statements, close.
///
/// A thin wrapper that turns SQLite result codes into `StorageError`s carrying `sqlite3_errmsg`. The
/// connection is opened in multi-thread mode (`SQLITE_OPEN_NOMUTEX`: no mutex per call), so it and its
/// statements must be used from one thread at a time; kvod uses it only from the loop thread, through
/// `SQLiteStore`, which owns it. Statements keep their database alive; `close()` finalizes nothing
/// itself, so finalize statements first to release the file at once.
final class SQLiteDatabase {
    /// The database file.
    let path: String
    private var handle: OpaquePointer?

    /// Opens the database file at `path`, creating it when missing unless `create` is false (then a missing
    /// file is SQLite's `SQLITE_CANTOPEN`).
    init(path: String, create: Bool = true) throws(StorageError) {
        self.path = path
        var opened: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX
        let code = sqlite3_open_v2(path, &opened, flags, nil)
        guard code == SQLITE_OK, let opened else {
            let message = opened.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(code))
            sqlite3_close_v2(opened)
            throw .sqlite(code: code, message: message, during: "opening '\(path)'")
        }
        handle = opened
    }

    deinit {
        close()
    }

    /// True until `close()`.
    var isOpen: Bool { handle != nil }

    /// True inside an explicit transaction (between `BEGIN` and its `COMMIT` or `ROLLBACK`).
    var isInTransaction: Bool {
        guard let handle else { return false }
        return sqlite3_get_autocommit(handle) == 0
    }

    /// Runs one or more statements of SQL text, discarding any rows.
    func exec(_ sql: String) throws(StorageError) {
        let handle = try openHandle(during: sql)
        let code = sqlite3_exec(handle, sql, nil, nil, nil)
        guard code == SQLITE_OK else { throw error(code, during: sql) }
    }

    /// Compiles one statement for repeated use.
    func prepare(_ sql: String) throws(StorageError) -> SQLiteStatement {
        let handle = try openHandle(during: sql)
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard code == SQLITE_OK, let statement else {
            sqlite3_finalize(statement)
            throw error(code, during: "preparing \(sql)")
        }
        return SQLiteStatement(handle: statement, database: self, sql: sql)
    }

    /// Closes the connection. The file (and its lock) is released once every statement of this
    /// database has been finalized. Idempotent.
    func close() {
        guard let handle else { return }
        sqlite3_close_v2(handle)
        self.handle = nil
    }

    /// How long a call waiting for a lock retries before `SQLITE_BUSY` (0: never waits).
    func setBusyTimeout(milliseconds: Int32) {
        guard let handle else { return }
        sqlite3_busy_timeout(handle, milliseconds)
    }

    /// Replaces SQLite's automatic checkpoints with `counter`: after each commit, `counter.frames` is
    /// the number of frames in the WAL (they go back to 0 when a writer restarts the WAL). The counter
    /// must outlive the connection; the hook runs on the committing thread, inside `COMMIT`.
    func countWALFrames(into counter: WALFrameCounter) {
        guard let handle else { return }
        sqlite3_wal_hook(handle, { context, _, _, frames in
            Unmanaged<WALFrameCounter>.fromOpaque(context!).takeUnretainedValue().frames = Int(frames)
            return SQLITE_OK
        }, Unmanaged.passUnretained(counter).toOpaque())
    }

    /// Runs a WAL checkpoint of `mode` (`SQLITE_CHECKPOINT_PASSIVE`, `…_TRUNCATE`): the result code, the
    /// frames in the WAL and the frames checkpointed (-1 each when unknown).
    func checkpoint(mode: Int32) -> (code: Int32, walFrames: Int, checkpointedFrames: Int) {
        guard let handle else { return (SQLITE_MISUSE, -1, -1) }
        var walFrames: Int32 = -1
        var checkpointed: Int32 = -1
        let code = sqlite3_wal_checkpoint_v2(handle, nil, mode, &walFrames, &checkpointed)
        return (code, Int(walFrames), Int(checkpointed))
    }

    /// The error for a failed call: `code` with the connection's current `sqlite3_errmsg`, and its extended
    /// code when the connection's is one of it (SQLITE_IOERR_FSYNC rather than SQLITE_IOERR: what a failure
    /// left depends on it, `SQLiteStore.assess`). Readers of the code compare `code & 0xFF` with the primary codes.
    func error(_ code: Int32, during: String) -> StorageError {
        let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(code))
        var reported = code
        if let handle {
            let extended = sqlite3_extended_errcode(handle)
            if extended & 0xFF == code & 0xFF { reported = extended }
        }
        return .sqlite(code: reported, message: message, during: during)
    }

    private func openHandle(during: String) throws(StorageError) -> OpaquePointer {
        guard let handle else { throw .closed }
        return handle
    }
}

/// The WAL's frame count after the last commit, written by the WAL hook (`SQLiteDatabase.countWALFrames`)
/// on the thread that commits: kvod's loop thread, which alone reads it.
final class WALFrameCounter {
    var frames = 0
}
