import CSQLite
import KVOJSON

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// When the store cannot write: the reserve, what a failed commit left, the probe that says writes can be
/// taken again, and the check that the database file is still the one the store writes (docs/design.md,
/// "When the store cannot write"). Loop thread, like the rest of `SQLiteStore`.
extension SQLiteStore {
    /// Without a reserve (`--disk-reserve 0`), the room that must be free before writes are taken again.
    static let minimumFreeBytesWithoutReserve = 1 << 20

    /// Holds `bytes` in reserve on the data directory's file system from the next `probeWritable()` on
    /// (`DiskReserve`; nil: its default for the file system's size; 0: none, and a reserve an earlier run
    /// left is removed). The server's store only.
    func useReserve(bytes: Int?) {
        let directory = String(databasePath.dropLast(SQLiteStore.fileName.count + 1))
        var size = 0
        var info = statvfs()
        if statvfs(directory, &info) == 0 { size = Int(info.f_blocks) &* Int(info.f_frsize) }
        let wanted = bytes ?? DiskReserve.defaultBytes(fileSystemSize: size)
        guard wanted > 0 else {
            _ = unlink(directory + "/" + DiskReserve.fileName)
            return
        }
        reserve = DiskReserve(directory: directory, bytes: wanted)
    }

    /// What a failed `commit` or `writeUsers` left. A transaction still open (its rollback failed) is
    /// `.unknown`; so are I/O errors (SQLITE_IOERR: a failed write or fsync may have left frames in the
    /// WAL that a restart would take as committed), corruption and a file that is no database.
    func assess(_ error: StorageError) -> StorageFailure {
        if database?.isInTransaction == true {
            return .unknown("\(error) (and the transaction could not be rolled back)")
        }
        guard case let .sqlite(code, _, _) = error else {
            return error == .closed ? .consistent("\(error)") : .unknown("\(error)")
        }
        switch code & 0xFF {
        case SQLITE_FULL:
            return .outOfSpace("the file system of '\(databasePath)' is full (\(error))")
        case SQLITE_READONLY, SQLITE_CANTOPEN, SQLITE_BUSY, SQLITE_LOCKED, SQLITE_NOMEM, SQLITE_PERM, SQLITE_AUTH:
            return .consistent("\(error)")
        default:
            return .unknown("\(error)")
        }
    }

    /// Gives the reserve's space back so that the failed commit can be tried again. Whether it held any.
    func releaseReserve() -> Bool {
        reserve?.release() ?? false
    }

    /// Whether writes can be taken again (at start-up, and while the server refuses writes): makes the
    /// reserve (a file system without room for it throws SQLITE_FULL, like a commit that finds none; without
    /// a reserve, 1 MiB must be free), then
    /// stores a probe (a row written and deleted in one
    /// transaction, which writes pages to the WAL and syncs them as a commit does).
    func probeWritable() throws(StorageError) {
        guard let database else { throw .closed }
        if reserve == nil {
            // No reserve to make: some room must be free, or the next commit would fail again at once.
            var info = statvfs()
            let directory = String(databasePath.dropLast(SQLiteStore.fileName.count + 1))
            if statvfs(directory, &info) == 0, Int(info.f_bavail) &* Int(info.f_frsize) < SQLiteStore.minimumFreeBytesWithoutReserve {
                throw .sqlite(code: SQLITE_FULL, message: "less than \(SQLiteStore.minimumFreeBytesWithoutReserve) bytes free", during: "checking for room")
            }
        }
        if let reserve {
            do throws(DiskReserveError) {
                try reserve.make()
            } catch where error.isOutOfSpace {
                throw .sqlite(code: SQLITE_FULL, message: "\(error)", during: "making the reserve")
            } catch {
                throw .directory(path: reserve.path, reason: "\(error)")
            }
        }
        do throws(StorageError) {
            try database.exec("BEGIN IMMEDIATE")
            try database.exec("INSERT INTO meta(key, value) VALUES('space_probe', zeroblob(\(pageSize))) ON CONFLICT(key) DO UPDATE SET value = excluded.value")
            try database.exec("DELETE FROM meta WHERE key = 'space_probe'")
            try database.exec("COMMIT")
        } catch {
            if database.isInTransaction { try? database.exec("ROLLBACK") }
            throw error
        }
    }

    /// Nil while `databasePath` still names the file the store opened; otherwise why not (deleted, or
    /// replaced by another file: a restore over a running server, a data directory removed). One `stat`.
    func filesProblem() -> String? {
        guard let opened = openedFile else { return nil }
        guard let now = FileIdentity(path: databasePath) else {
            return "the database file '\(databasePath)' was deleted (or its directory removed) while kvod was running"
        }
        guard now == opened else {
            return "the database file '\(databasePath)' was replaced by another file while kvod was running"
        }
        return nil
    }

    /// The bytes the database and its WAL take on disk now (`--max-disk`): two `stat`s.
    func bytesOnDisk() -> Int {
        var total = 0
        for path in [databasePath, databasePath + "-wal"] {
            var info = stat()
            if stat(path, &info) == 0 { total += Int(info.st_blocks) &* 512 }
        }
        return total
    }
}
