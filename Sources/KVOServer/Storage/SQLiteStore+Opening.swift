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

/// Opening a data directory: the connection's settings, the schema, the history ledger and the directory checks.
/// Loop thread (or the thread that opened it), like the rest of `SQLiteStore`.
extension SQLiteStore {
    func configure(_ database: SQLiteDatabase) throws(StorageError) {
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
    func createSchema(_ database: SQLiteDatabase) throws(StorageError) {
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
            // Every version only added tables, version 5 a column, and version 6 a key to history (a batch's rows
            // share a revision), so creating what is missing, rebuilding history with its rows numbered in
            // revision order, and then recording the current version is the whole migration.
            if tables.contains("objects"), try !columnNames(database, of: "objects").contains("rev") {
                try database.exec("ALTER TABLE objects ADD COLUMN rev INTEGER NOT NULL DEFAULT 0")
            }
            if tables.contains("history"), try !columnNames(database, of: "history").contains("seq") {
                try database.exec("""
                    CREATE TABLE history_v6(seq INTEGER PRIMARY KEY, rev INTEGER NOT NULL, object TEXT NOT NULL,
                                            change TEXT NOT NULL, bytes INTEGER NOT NULL);
                    INSERT INTO history_v6(seq, rev, object, change, bytes) SELECT rev, rev, object, change, bytes FROM history;
                    DROP TABLE history;
                    ALTER TABLE history_v6 RENAME TO history;
                    """)
            }
            try database.exec("""
                CREATE TABLE IF NOT EXISTS objects(id TEXT PRIMARY KEY, value TEXT NOT NULL, rev INTEGER NOT NULL DEFAULT 0)
                    WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS history(seq INTEGER PRIMARY KEY, rev INTEGER NOT NULL, object TEXT NOT NULL,
                                                   change TEXT NOT NULL, bytes INTEGER NOT NULL);
                CREATE TABLE IF NOT EXISTS classes(name TEXT PRIMARY KEY, definition TEXT NOT NULL);
                CREATE TABLE IF NOT EXISTS bindings(id INTEGER PRIMARY KEY, definition TEXT NOT NULL);
                CREATE TABLE IF NOT EXISTS redo(object TEXT NOT NULL, rev INTEGER NOT NULL, change TEXT NOT NULL,
                                                PRIMARY KEY(object, rev)) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS users(name TEXT PRIMARY KEY, record TEXT NOT NULL) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS expiries(object TEXT PRIMARY KEY, ttl INTEGER NOT NULL, deadline INTEGER NOT NULL)
                    WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS sessions(id TEXT PRIMARY KEY, record TEXT NOT NULL) WITHOUT ROWID;
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

    /// The names of `table`'s columns.
    func columnNames(_ database: SQLiteDatabase, of table: String) throws(StorageError) -> Set<String> {
        let query = try database.prepare("SELECT name FROM pragma_table_info('\(table)')")
        defer { query.finalize() }
        var names = Set<String>()
        while try query.step() { names.insert(query.string(0)) }
        return names
    }

    /// The names of the tables in the database.
    func tableNames(_ database: SQLiteDatabase) throws(StorageError) -> Set<String> {
        let query = try database.prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
        defer { query.finalize() }
        var names = Set<String>()
        while try query.step() { names.insert(query.string(0)) }
        return names
    }

    /// Reads the stored counters and the revision and size of every history row, checking that each is
    /// in range (`.corrupt` naming the row otherwise).
    func loadLedger() throws(StorageError) {
        guard let database else { throw .closed }
        storedRevision = try readRevision(database) ?? 0
        storedLastBindingID = try readLastBindingID(database) ?? 0
        let rows = try database.prepare("SELECT rev, bytes, seq FROM history ORDER BY seq")
        defer { rows.finalize() }
        var previousRevision: Int64 = 0
        while try rows.step() {
            let revIsInteger = rows.isInteger(0)
            let bytesAreInteger = rows.isInteger(1)
            let rev = rows.int64(0)
            let bytes = rows.int64(1)
            guard revIsInteger, rev >= 1, UInt64(rev) <= storedRevision else {
                throw .corrupt(row: "history rev \(rows.string(0))",
                               reason: "the revision is not an integer from 1 to the stored revision \(storedRevision)")
            }
            guard rev >= previousRevision else {
                throw .corrupt(row: "history rev \(rev)", reason: "it follows a row of the later revision \(previousRevision)")
            }
            previousRevision = rev
            guard bytesAreInteger, (0...SQLiteStore.maximumHistoryRowBytes).contains(bytes) else {
                throw .corrupt(row: "history rev \(rev)",
                               reason: "bytes '\(rows.string(1))' is not an integer from 0 to \(SQLiteStore.maximumHistoryRowBytes)")
            }
            ledger.append(sequence: rows.int64(2), revision: UInt64(rev), bytes: Int(bytes))
        }
    }

    /// Drops the oldest history rows past the limits (they may be lower than when the rows were written).
    func trimToLimits() throws(StorageError) {
        guard let database else { throw .closed }
        let drop = ledger.rowsToDrop(limit: historyLimit, byteLimit: historyByteLimit)
        guard drop > 0 else { return }
        let trim = try database.prepare("DELETE FROM history WHERE seq <= ?1")
        defer { trim.finalize() }
        try trim.bind(1, ledger.sequence(at: drop - 1))
        try trim.run()
        ledger.removeFirst(drop)
    }

    /// Names the file in what went wrong while opening or restoring: `SQLITE_BUSY` means another connection
    /// holds the lock; a read-only file, an I/O error, a full disk, a file that cannot be opened, is not a
    /// database or is damaged, and any other SQLite error, become `.unusableDatabase` saying so in words
    /// (SQLite's own message, "disk I/O error", "database disk image is malformed", names neither the file
    /// nor the likely cause). The store's own refusals (`.corrupt` naming a row, `.missingTable`, ...) pass.
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
        case SQLITE_CORRUPT:
            return .unusableDatabase(path: databasePath, reason: "it is damaged (malformed: truncated or overwritten): restore it from a backup, or move it away to start with an empty store (\(detail))")
        case SQLITE_NOMEM:
            return .unusableDatabase(path: databasePath, reason: "SQLite ran out of memory reading it (\(detail))")
        default:
            return .unusableDatabase(path: databasePath, reason: "SQLite refused it (\(detail))")
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
            var info = stat()
            let owner = stat(directory, &info) == 0
                ? " (it is owned by uid \(info.st_uid) gid \(info.st_gid) with mode 0\(String(info.st_mode & 0o777, radix: 8)); kvod runs as uid \(geteuid()) gid \(getegid()))"
                : ""
            throw .directory(path: directory, reason: "it is not writable (\(reason)): kvod creates \(fileName) and its -wal file there\(owner)")
        }
        var info = stat()
        guard stat(databasePath, &info) == 0 else { return }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw .unusableDatabase(path: databasePath, reason: "it is not a regular file (\(fileKind(info.st_mode))): move it away or point --data elsewhere")
        }
        if access(databasePath, R_OK | W_OK) != 0 {
            let reason = String(cString: strerror(errno))
            let mode = String(info.st_mode & 0o777, radix: 8)
            throw .unusableDatabase(path: databasePath, reason: """
                it cannot be read and written by kvod, which runs as uid \(geteuid()) gid \(getegid()) (\(reason)): \
                the file is owned by uid \(info.st_uid) gid \(info.st_gid) with mode 0\(mode); give it to kvod's user \
                (chown) or make it readable and writable by it, and check that the file system is not read-only
                """)
        }
    }

    /// A file type in words, for a database path that is not a regular file.
    static func fileKind(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFDIR: "a directory"
        case S_IFIFO: "a FIFO"
        case S_IFSOCK: "a socket"
        case S_IFCHR, S_IFBLK: "a device"
        default: "not a regular file"
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
