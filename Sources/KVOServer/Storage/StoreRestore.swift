#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `kvod restore`: puts a backup (`StoreBackup`) in place as a stopped kvod's database.
///
/// Under the data directory's lock (`StoreLock`: a running kvod holds it, and a restore is refused), the
/// backup is checked first (`integrity_check`, a kvod schema this kvod reads), so a damaged or foreign file
/// changes nothing. A database already there is refused unless `replace`; then it is set aside, never
/// deleted: `kvod.sqlite3` and its `-wal` renamed together to `kvod.sqlite3.replaced-<UTC time>` and
/// `…-wal` (still a database SQLite can open), its `-shm` removed. A set-aside name is never reused and no
/// file is replaced (`SetAsideFile`: `-2`, `-3`, … after the time when it is taken). A `-wal` or `-shm` left
/// without a database (a lost database) is set aside the same way, since SQLite would apply that log to the
/// restored file. The copy is written first, as `kvod.sqlite3.restoring` (0600) and synced (a copy that fails
/// changes nothing), then renamed into place, and the directory's marker written (`DataDirectoryMarker`), so
/// kvod starts on it without `--init`. The data directory's own database is refused as the backup to restore.
///
/// Blocking file and SQLite calls; for the `kvod restore` command's thread.
package enum StoreRestore {
    /// What was restored, and the files set aside (the database it replaced and its `-wal`; empty when none).
    package struct Outcome: Sendable {
        package let summary: StoreBackup.Summary
        package let setAside: [String]
    }

    package static func restore(from backup: String, dataDirectory: String, replace: Bool) throws(BackupError) -> Outcome {
        let summary: StoreBackup.Summary
        do throws(BackupError) {
            var info = stat()
            guard stat(backup, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_size > 0 else {
                throw .notABackup(backup, "it is missing, empty or not a file")
            }
            summary = try StoreBackup.check(backup)
        } catch {
            switch error {
            case let .damagedCopy(_, verdict): throw .notABackup(backup, "integrity_check: \(verdict)")
            case let .storage(failure): throw .notABackup(backup, failure.description)
            default: throw error
            }
        }
        if access(dataDirectory, F_OK) != 0, mkdir(dataDirectory, StoreFileModes.directoryMode) != 0 {
            throw .cannotWrite(dataDirectory, String(cString: strerror(errno)))
        }
        let database = dataDirectory + "/" + SQLiteStore.fileName
        let lock: StoreLock?
        do {
            lock = try StoreLock(path: database + ".lock")
        } catch {
            throw .storage(error)
        }
        guard let lock else { throw .inUse(directory: dataDirectory) }
        defer { withExtendedLifetime(lock) {} }

        var existing = stat()
        let hasDatabase = stat(database, &existing) == 0 && existing.st_size > 0
        var given = stat()
        if hasDatabase, stat(backup, &given) == 0, given.st_dev == existing.st_dev, given.st_ino == existing.st_ino {
            throw .ownDatabase(backup)
        }
        if hasDatabase, !replace { throw .databaseExists(database) }
        // The copy first: a copy that fails (a full disk) leaves the directory as it was.
        let restoring = database + ".restoring"
        unlink(restoring)
        try copyFile(backup, to: restoring)
        do throws(BackupError) {
            try StoreBackup.syncFile(restoring)
        } catch {
            unlink(restoring)
            throw error
        }
        // A name no file has (with its `-wal`'s), and a move that never replaces one: a second restore in the
        // same second keeps the first one's set-aside database (issue 42).
        let aside = SetAsideFile.freeName(database + ".replaced-" + utcStamp(), suffixes: ["", "-wal"])
        var setAside: [String] = []
        if hasDatabase {
            let failure = SetAsideFile.move(database, to: aside)
            guard failure == 0 else {
                unlink(restoring)
                throw .cannotWrite(aside, String(cString: strerror(failure)) + "; nothing was replaced")
            }
            setAside.append(aside)
        }
        if access(database + "-wal", F_OK) == 0 {
            // With its database, the pair stays openable; alone (a lost database), it is kept for an expert.
            let failure = SetAsideFile.move(database + "-wal", to: aside + "-wal")
            guard failure == 0 else {
                unlink(restoring)
                throw .cannotWrite(aside + "-wal", String(cString: strerror(failure)) + "; nothing was replaced")
            }
            setAside.append(aside + "-wal")
        }
        if access(database + "-shm", F_OK) == 0, unlink(database + "-shm") != 0 {
            throw .cannotWrite(database + "-shm", String(cString: strerror(errno)))
        }
        if access(database, F_OK) == 0 { unlink(database) }  // an empty file
        guard rename(restoring, database) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(restoring)
            throw .cannotWrite(database, reason)
        }
        StoreBackup.syncDirectory(of: database)
        // The marker (its id kept, or a new one) names the restored file and no write-ahead log: whatever the
        // replaced database's kvod recorded is of files no longer here (`ForeignLogCheck`).
        do {
            let restored = FileIdentity(path: database).map { DataDirectoryMarker.Files(database: $0, log: nil) }
            try DataDirectoryMarker.record(inDirectory: dataDirectory, files: restored,
                                           keeping: DataDirectoryMarker.load(inDirectory: dataDirectory))
        } catch {
            throw .storage(error)
        }
        return Outcome(summary: summary, setAside: setAside)
    }

    /// Copies `source` into the new file `destination`, created 0600.
    private static func copyFile(_ source: String, to destination: String) throws(BackupError) {
        let input = open(source, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw .notABackup(source, String(cString: strerror(errno))) }
        defer { close(input) }
        let output = open(destination, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, StoreFileModes.fileMode)
        guard output >= 0 else { throw .cannotWrite(destination, String(cString: strerror(errno))) }
        defer { close(output) }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
            if count == 0 { return }
            guard count > 0 else {
                unlink(destination)
                throw .notABackup(source, String(cString: strerror(errno)))
            }
            var written = 0
            while written < count {
                let result = buffer.withUnsafeBytes { write(output, $0.baseAddress! + written, count - written) }
                guard result > 0 else {
                    let reason = String(cString: strerror(errno))
                    unlink(destination)
                    throw .cannotWrite(destination, reason)
                }
                written += result
            }
        }
    }

    /// `20261128T140512Z`: the time, for the name of a database set aside.
    private static func utcStamp() -> String {
        var now = time(nil)
        var parts = tm()
        gmtime_r(&now, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(parts.tm_year + 1900)\(two(parts.tm_mon + 1))\(two(parts.tm_mday))T"
            + "\(two(parts.tm_hour))\(two(parts.tm_min))\(two(parts.tm_sec))Z"
    }
}
