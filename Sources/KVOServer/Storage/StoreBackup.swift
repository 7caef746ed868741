#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `kvod backup`: a consistent copy of a data directory's database, taken while kvod runs (or not).
///
/// The copy is SQLite's `VACUUM INTO` on a connection of its own: one read transaction, so the copy is the
/// database as one commit left it (every write kvod acknowledged before it began, nothing half of a group
/// commit), while kvod goes on writing (WAL mode: a reader never blocks the writer). It takes no lock of the
/// data directory. The copy is written beside its destination as `<destination>.partial`, created 0600 first
/// (it holds the users' password and token hashes, like the store), checked (`PRAGMA integrity_check`, the
/// schema version, the revision), synced, and only then given the destination's name (a hard link, which
/// never replaces a file, then the partial name removed), with its directory synced: a backup that fails or
/// is interrupted leaves no file under the destination's name, and an existing destination is never replaced.
///
/// Blocking file and SQLite calls; for the `kvod backup` command's thread (never kvod's loop).
package enum StoreBackup {
    /// What a backup holds, read back from the copy.
    package struct Summary: Equatable, Sendable {
        /// The store's revision in the copy (0 for a store that was never written).
        package let revision: UInt64
        package let objects: Int
        package let historyRows: Int
        package let schemaVersion: Int64
        package let bytes: Int
    }

    /// Copies the database of `dataDirectory` to `destination` (a file that must not exist).
    package static func copy(dataDirectory: String, to destination: String) throws(BackupError) -> Summary {
        let source = dataDirectory + "/" + SQLiteStore.fileName
        var info = stat()
        guard stat(source, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_size > 0 else {
            throw .noDatabase(directory: dataDirectory)
        }
        guard access(destination, F_OK) != 0 else { throw .destinationExists(destination) }
        // A partial copy left by an interrupted backup of our own is replaced: its name says it is never a backup.
        let partial = destination + ".partial"
        let summary = try copyChecked(source, into: partial)
        do throws(BackupError) {
            try syncFile(partial)
            // A hard link, not a rename: it fails if the destination appeared meanwhile, where a rename would
            // replace it. A file system without hard links (vfat) gets the rename, after one more look.
            if link(partial, destination) == 0 {
                unlink(partial)
            } else {
                let linkError = errno
                if linkError == EEXIST { throw .destinationExists(destination) }
                guard linkError == EPERM || linkError == EOPNOTSUPP else {
                    throw .cannotWrite(destination, String(cString: strerror(linkError)))
                }
                guard access(destination, F_OK) != 0 else { throw .destinationExists(destination) }
                guard rename(partial, destination) == 0 else { throw .cannotWrite(destination, String(cString: strerror(errno))) }
            }
            syncDirectory(of: destination)
            return summary
        } catch {
            unlink(partial)
            throw error
        }
    }

    /// The server's `backup` operation (`BackupTransfers`): the same copy as `copy(dataDirectory:to:)` of the database
    /// at `source` into `partial` (replaced if an earlier run left it; created 0600), checked the same way, not synced
    /// (it is streamed to the client and removed). On failure `partial` is removed. Blocking: the loop's thread pool.
    static func copyChecked(_ source: String, into partial: String) throws(BackupError) -> Summary {
        unlink(partial)
        let descriptor = open(partial, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, StoreFileModes.fileMode)
        guard descriptor >= 0 else { throw .cannotWrite(partial, String(cString: strerror(errno))) }
        close(descriptor)
        do throws(BackupError) {
            try copyDatabase(source, into: partial)
            return try check(partial)
        } catch {
            unlink(partial)
            throw error
        }
    }

    /// `kvod verify FILE`: whether `path` is a whole kvod backup this kvod can restore (a regular file, SQLite's
    /// `integrity_check`, a kvod schema no newer than this kvod's), and what it holds. Changes nothing in the file.
    package static func verify(_ path: String) throws(BackupError) -> Summary {
        var info = stat()
        guard stat(path, &info) == 0 else { throw .notVerified(path, String(cString: strerror(errno))) }
        guard info.st_mode & S_IFMT == S_IFREG else { throw .notVerified(path, "not a regular file") }
        guard info.st_size > 0 else { throw .notVerified(path, "the file is empty") }
        // Every SQLite database begins with these 16 bytes: anything else is not one (and is not opened).
        let header = Array("SQLite format 3\0".utf8)
        var first = [UInt8](repeating: 0, count: header.count)
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw .notVerified(path, String(cString: strerror(errno))) }
        let got = first.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        close(descriptor)
        guard got == header.count, first == header else { throw .notVerified(path, "not an SQLite database") }
        let summary: Summary
        do throws(BackupError) {
            summary = try check(path)
        } catch {
            switch error {
            case let .damagedCopy(_, verdict): throw .notVerified(path, "integrity check: \(verdict)")
            case let .storage(storageError): throw .notVerified(path, storageError.description)
            default: throw error
            }
        }
        guard summary.schemaVersion <= SQLiteStore.schemaVersion else {
            throw .notVerified(path, "schema \(summary.schemaVersion) is newer than this kvod's \(SQLiteStore.schemaVersion)")
        }
        return summary
    }

    /// `VACUUM INTO`: the whole database, as one read transaction sees it, into the empty file `partial`.
    private static func copyDatabase(_ source: String, into partial: String) throws(BackupError) {
        do throws(StorageError) {
            let database = try SQLiteDatabase(path: source, create: false)
            defer { database.close() }
            // kvod's commits are short; a checkpoint or a WAL recovery may hold the file for a moment.
            database.setBusyTimeout(milliseconds: 10_000)
            let version = try schemaVersion(of: database)
            guard version <= SQLiteStore.schemaVersion else {
                throw StorageError.unsupportedSchema(path: source, found: version, supported: SQLiteStore.schemaVersion)
            }
            let vacuum = try database.prepare("VACUUM INTO ?1")
            defer { vacuum.finalize() }
            try vacuum.bind(1, text: partial)
            _ = try vacuum.step()
        } catch {
            throw .storage(error)
        }
    }

    /// Reads the copy back: whole (`integrity_check`), a kvod database of a schema this kvod reads, and what it holds.
    /// Also `StoreRestore`'s check of the file it is given.
    static func check(_ partial: String) throws(BackupError) -> Summary {
        let verdict: String
        var summary: Summary?
        do throws(StorageError) {
            let database = try SQLiteDatabase(path: partial, create: false)
            defer { database.close() }
            func first(_ sql: String) throws(StorageError) -> (text: String, number: Int64)? {
                let query = try database.prepare(sql)
                defer { query.finalize() }
                return try query.step() ? (query.string(0), query.int64(0)) : nil
            }
            verdict = try first("PRAGMA integrity_check")?.text ?? "no answer"
            if verdict == "ok" {
                let version = try schemaVersion(of: database)
                let revision = try first("SELECT value FROM meta WHERE key = 'revision'")?.number ?? 0
                let objects = try first("SELECT count(*) FROM objects")?.number ?? 0
                let historyRows = try first("SELECT count(*) FROM history")?.number ?? 0
                var info = stat()
                let bytes = stat(partial, &info) == 0 ? Int(info.st_size) : 0
                summary = Summary(revision: UInt64(max(0, revision)), objects: Int(objects), historyRows: Int(historyRows),
                                  schemaVersion: version, bytes: bytes)
            }
        } catch {
            throw .storage(error)
        }
        guard let summary else { throw .damagedCopy(partial, verdict) }
        return summary
    }

    /// The `meta` row `schema_version`; `.missingTable` when the file has no `meta` (not a kvod database).
    private static func schemaVersion(of database: SQLiteDatabase) throws(StorageError) -> Int64 {
        let tables = try database.prepare("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'meta'")
        let hasMeta = try tables.step() && tables.int64(0) == 1
        tables.finalize()
        guard hasMeta else { throw .missingTable(path: database.path, table: "meta") }
        let query = try database.prepare("SELECT value FROM meta WHERE key = 'schema_version'")
        defer { query.finalize() }
        guard try query.step(), query.isInteger(0) else {
            throw .corrupt(row: "meta schema_version", reason: "the row is missing or not an integer")
        }
        return query.int64(0)
    }

    static func syncFile(_ path: String) throws(BackupError) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw .cannotWrite(path, String(cString: strerror(errno))) }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw .cannotWrite(path, "fsync: " + String(cString: strerror(errno))) }
    }

    /// Makes the rename durable; a failure leaves a whole backup that may not survive power loss.
    static func syncDirectory(of path: String) {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).dropLast()
        let directory = parts.isEmpty ? "." : (parts.joined(separator: "/").isEmpty ? "/" : parts.joined(separator: "/"))
        let descriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        _ = fsync(descriptor)
        close(descriptor)
    }
}
