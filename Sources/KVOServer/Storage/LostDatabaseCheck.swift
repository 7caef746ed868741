#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Whether a data directory lost its database: `kvod.sqlite3` missing or empty (0 bytes) where the
/// directory shows that it held one. The traces: the marker `kvod.id` (`DataDirectoryMarker`), or a `-wal`
/// or `-shm` file of the database. Not the lock file alone: kvod creates it before the database, so it
/// also remains from a start that stopped before creating one (and anything may `flock` it); a directory
/// of a kvod older than the marker gets the marker at its first start with this one.
///
/// SQLite would take a missing or empty file for a new database, and kvod would start as a healthy,
/// empty server: a failed restore, a copy cut short or a deleted file would look like a
/// deliberate wipe, and clients would write over the loss. `SQLiteStore.init` refuses such a directory
/// (`StorageError.lostDatabase`) unless told to start empty (`--init`), and then sets the lost
/// database's leftover `-wal` and `-shm` aside (`setAsideLeftovers()`) so that SQLite does not apply them
/// to the new one. A new directory, or one with an empty file and no trace (a file created by hand), is
/// no loss.
///
/// A value, made under the directory's lock (`StoreLock`). Blocking file calls (start-up only). Any thread.
struct LostDatabaseCheck {
    /// The database file, `<directory>/kvod.sqlite3`.
    let databasePath: String
    /// Whether the database file is there with at least one byte.
    let databaseHasContent: Bool
    /// Whether the database file is there at all (empty or not).
    let databaseExists: Bool
    /// The names of the files that show a database lived here (`kvod.id`, `kvod.sqlite3-wal`, …), in a
    /// fixed order.
    let traces: [String]

    /// Looks at `directory` and its database file `databasePath`.
    init(directory: String, databasePath: String) {
        self.databasePath = databasePath
        var info = stat()
        databaseExists = stat(databasePath, &info) == 0
        databaseHasContent = databaseExists && info.st_size > 0
        var traces: [String] = []
        if DataDirectoryMarker.exists(inDirectory: directory) { traces.append(DataDirectoryMarker.fileName) }
        let name = LostDatabaseCheck.lastComponent(databasePath)
        for suffix in ["-wal", "-shm"] where access(databasePath + suffix, F_OK) == 0 {
            traces.append(name + suffix)
        }
        self.traces = traces
    }

    /// Whether the directory held a database that is now missing or empty.
    var isLost: Bool { !databaseHasContent && !traces.isEmpty }

    /// The refusal for a lost database; nil when nothing is lost.
    var refusal: StorageError? {
        isLost ? .lostDatabase(path: databasePath, missing: !databaseExists, traces: traces) : nil
    }

    /// `--init` over a lost database: moves its leftover `-wal` away (to `kvod.sqlite3-wal.lost`, or `…lost-2`,
    /// `-3`, … when that name is taken: it may hold the last commits, for an expert to look at; no file is
    /// replaced, `SetAsideFile`) and removes its `-shm` (an
    /// index of that WAL), so that SQLite starts the new database clean. Returns one line for the log per
    /// file, and one saying that a new, empty database replaces the lost one. Throws `.unusableDatabase`
    /// when a leftover cannot be moved (SQLite would apply it to the new database).
    func setAsideLeftovers() throws(StorageError) -> [String] {
        let state = databaseExists ? "empty (0 bytes)" : "missing"
        var notes = ["--init: '\(databasePath)' was \(state) in a data directory that held a database "
            + "(\(traces.joined(separator: ", "))): starting with a new, empty database"]
        let wal = databasePath + "-wal"
        if access(wal, F_OK) == 0 {
            let lost = SetAsideFile.freeName(wal + ".lost")
            let failure = SetAsideFile.move(wal, to: lost)
            guard failure == 0 else {
                throw .unusableDatabase(path: databasePath, reason: "--init cannot move the lost database's '\(wal)' aside (\(String(cString: strerror(failure)))): move it away yourself")
            }
            notes.append("--init: moved the lost database's write-ahead log '\(wal)' to '\(lost)'")
        }
        let shm = databasePath + "-shm"
        if access(shm, F_OK) == 0 {
            guard unlink(shm) == 0 else {
                throw .unusableDatabase(path: databasePath, reason: "--init cannot remove the lost database's '\(shm)' (\(String(cString: strerror(errno)))): remove it yourself")
            }
        }
        return notes
    }

    /// The file name at the end of `path`.
    static func lastComponent(_ path: String) -> String {
        path.split(separator: "/", omittingEmptySubsequences: true).last.map(String.init) ?? path
    }
}
