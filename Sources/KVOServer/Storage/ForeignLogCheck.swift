#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// At start-up, before SQLite opens the database: whether the `-wal` beside `kvod.sqlite3` was written for
/// another database file, and if so, setting it aside rather than letting SQLite apply it (issue 42).
///
/// SQLite applies whatever `kvod.sqlite3-wal` it finds to whatever `kvod.sqlite3` it opens: a WAL holds page
/// images and nothing that ties it to one database file. A database replaced while kvod ran (a backup moved
/// over it, a restore by hand) and a kvod that then did not stop cleanly (SIGKILL, a crash, a power loss)
/// leave the old database's log beside the new file; applied, it made the new file "malformed", or silently
/// turned it back into the old state. (A kvod that stops cleanly sets its log aside itself:
/// `SQLiteStore.close()`.)
///
/// What ties them is the data directory's marker (`DataDirectoryMarker.Files`): the device and inode of the
/// database file and of the `-wal` the store last had open (SQLite creates the `-wal` when it opens the
/// database and keeps that file, truncating it but never making a new one, until the last connection closes
/// it and removes it; the marker is rewritten at each start and after a clean stop). The log is set aside
/// when, and only when, the `-wal` there is that very file while the database file is another one: the log
/// was written for a file that is no longer at this path. Every other case is left to SQLite as before:
/// - the database file is the recorded one: its own log after a crash (or one a tool such as `sqlite3` made
///   for it), which holds acknowledged commits;
/// - both files differ from the recorded ones: the directory was copied or moved whole (to another file system,
///   from a file-level backup, a device renumbered at boot), database and log together;
/// - no marker, or one without the lines (an older kvod): nothing to compare (the start records them);
/// - no `-wal`: nothing to apply.
/// Identity by device and inode, not by content: a backup made by copying carries the same content (and the
/// same kvod tables) as the live database, while a moved, copied or restored file is a new inode. (A file
/// overwritten in place, `cp` onto the live database, keeps its inode and cannot be told; docs/protocol.md says
/// not to.)
///
/// Set aside, not refused: the operator put that database file there (or a restore did), kvod cannot do
/// anything else useful with the log, and a kvod that stopped cleanly would have set it aside itself; refusing
/// would keep the server down until someone moves the file by hand, with the same outcome. The log is kept
/// (`kvod.sqlite3-wal.lost`, `-2`, … : `SetAsideFile`, never replacing a file), since with the database file it
/// was written for (if that still exists somewhere) it holds that database's last commits; a warning says so.
///
/// Stateless; blocking file calls, under the directory's lock (`StoreLock`), in `SQLiteStore.init`. Any thread.
enum ForeignLogCheck {
    /// Sets aside `databasePath`'s `-wal` (and removes its `-shm`, an index of that log) when `marker` shows it
    /// was written for another database file. One line for the log per file handled; none when the log is the
    /// database's (or cannot be told). Throws `.unusableDatabase` when such a log cannot be moved (SQLite would
    /// apply it).
    static func setAsideForeignLog(databasePath: String, marker: DataDirectoryMarker.Contents?) throws(StorageError) -> [String] {
        let wal = databasePath + "-wal"
        guard let recorded = marker?.files, let recordedLog = recorded.log,
              let log = FileIdentity(path: wal), log == recordedLog,
              let database = FileIdentity(path: databasePath), database != recorded.database else { return [] }
        let why = "is the write-ahead log kvod last had open for the database file \(recorded.database.text), "
            + "but '\(databasePath)' is now another file (\(database.text)): the database was replaced while kvod "
            + "ran or before a kvod that did not stop cleanly was started again"
        let lost = SetAsideFile.freeName(wal + ".lost")
        let failure = SetAsideFile.move(wal, to: lost)
        guard failure == 0 else {
            throw .unusableDatabase(path: databasePath, reason: "'\(wal)' \(why), and it cannot be moved aside (\(String(cString: strerror(failure)))): move it away yourself")
        }
        var notes = ["'\(wal)' \(why): moved it to '\(lost)' instead of applying it to a database it was not written for"]
        let shm = databasePath + "-shm"
        if access(shm, F_OK) == 0 {
            guard unlink(shm) == 0 else {
                throw .unusableDatabase(path: databasePath, reason: "'\(shm)', the index of a write-ahead log written for another database file, cannot be removed (\(String(cString: strerror(errno)))): remove it yourself")
            }
            notes.append("removed '\(shm)', the index of that write-ahead log")
        }
        return notes
    }
}
