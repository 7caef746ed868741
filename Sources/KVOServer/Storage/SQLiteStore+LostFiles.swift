#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Which files are the store's own, and what it does with them when its database file is lost (issue 42): the
/// identities recorded at open (in the store and in the directory's marker, `DataDirectoryMarker`), the
/// write-ahead log set aside at `close()` when the database file was deleted or replaced, and the marker
/// told after a clean close that no log is left. The start-time side is `ForeignLogCheck`. Loop thread (or
/// the thread that opened the store), like the rest of `SQLiteStore`.
extension SQLiteStore {
    /// Once SQLite has opened the database (and with it created or opened its `-wal` and `-shm`, which it keeps
    /// until the last connection closes): records the three files' identities, and the database's and the log's
    /// in the marker. Without `marker` (a new database, one `--init` replaced, a directory without a readable
    /// marker) a new marker is written, and a failure throws as the open's; otherwise the marker is rewritten
    /// (keeping its id) only when the files changed, and a failure is a warning in `openingNotes` (a restart on a
    /// full disk still serves reads).
    func recordOpenedFiles(marker: DataDirectoryMarker.Contents?) throws(StorageError) {
        openedFile = FileIdentity(path: databasePath)
        openedLog = FileIdentity(path: databasePath + "-wal")
        openedIndex = FileIdentity(path: databasePath + "-shm")
        let files = openedFile.map { DataDirectoryMarker.Files(database: $0, log: openedLog) }
        guard let marker else {
            try DataDirectoryMarker.record(inDirectory: directory, files: files)
            return
        }
        guard marker.files != files else { return }
        do {
            try DataDirectoryMarker.record(inDirectory: directory, files: files, keeping: marker)
        } catch {
            openingNotes.append("\(error): a start after a crash cannot tell a write-ahead log written for another database file from this database's own")
        }
    }

    /// `close()` with the database file deleted or replaced (`problem`, as `filesProblem()` says it), before
    /// SQLite closes: SQLite then neither checkpoints nor removes the `-wal` and `-shm` (it sees the file moved),
    /// and the next start would apply this log to whatever file is at the path. Moves the `-wal` to
    /// `kvod.sqlite3-wal.lost` (`-2`, … : `SetAsideFile`, no file replaced; it holds the last commits of the
    /// database it was written for) and removes the `-shm` (an index of that log), each only when it is the
    /// very file SQLite opened for this store: after the replacement the paths may name another process's files
    /// (another kvod on a recreated directory, a tool that opened the new file), which are left alone. One line
    /// per file for the log.
    func setAsideOwnLogs(because problem: String) -> [String] {
        var notes: [String] = []
        let wal = databasePath + "-wal"
        if let openedLog, let now = FileIdentity(path: wal) {
            if now == openedLog {
                let lost = SetAsideFile.freeName(wal + ".lost")
                let failure = SetAsideFile.move(wal, to: lost)
                if failure == 0 {
                    notes.append("\(problem): moved this kvod's write-ahead log '\(wal)' to '\(lost)' rather than leave it where SQLite would apply it to the next database file at that path (it holds the last commits of the database it was written for)")
                } else {
                    notes.append("\(problem): could not move this kvod's write-ahead log '\(wal)' aside (\(String(cString: strerror(failure)))); the next start sets it aside (the data directory's marker names it), or move it away yourself")
                }
            } else {
                notes.append("\(problem): left '\(wal)' where it is: it is not the write-ahead log this kvod wrote (another process made it after the database file was replaced)")
            }
        }
        let shm = databasePath + "-shm"
        if let openedIndex, let now = FileIdentity(path: shm) {
            if now == openedIndex {
                if unlink(shm) == 0 {
                    notes.append("\(problem): removed this kvod's '\(shm)' (the index of its write-ahead log)")
                } else {
                    notes.append("\(problem): could not remove this kvod's '\(shm)' (\(String(cString: strerror(errno))))")
                }
            } else {
                notes.append("\(problem): left '\(shm)' where it is: it is not the one this kvod used (another process made it after the database file was replaced)")
            }
        }
        return notes
    }

    /// After a clean close (SQLite copied the log into the database and removed it): the marker records that no
    /// log is left, so that a `-wal` a later tool makes (whose file may get this one's freed inode number) is
    /// never taken for this store's. Nothing when the log is still there (a reader kept SQLite from
    /// checkpointing it: it is still this database's). A line for the log when the marker cannot be written.
    func recordLogRemoved() -> String? {
        guard let openedFile, openedLog != nil, access(databasePath + "-wal", F_OK) != 0 else { return nil }
        do {
            try DataDirectoryMarker.record(inDirectory: directory, files: DataDirectoryMarker.Files(database: openedFile, log: nil),
                                           keeping: DataDirectoryMarker.load(inDirectory: directory))
        } catch {
            return "\(error): the marker still names the write-ahead log this kvod removed at its stop"
        }
        return nil
    }
}
