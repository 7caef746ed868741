/// Why `kvod backup` wrote no backup, or `kvod restore` restored nothing. Each description is one sentence
/// naming the file.
package enum BackupError: Error, CustomStringConvertible {
    /// The data directory holds no database (`kvod.sqlite3` missing or empty).
    case noDatabase(directory: String)
    /// The destination exists: a backup never replaces a file.
    case destinationExists(String)
    /// The copy (or its directory) cannot be written: the `errno` text.
    case cannotWrite(String, String)
    /// The database could not be read (SQLite's error, a newer schema, not a kvod database).
    case storage(StorageError)
    /// The copy did not read back whole: SQLite's `integrity_check` verdict.
    case damagedCopy(String, String)
    /// `kvod restore`: a kvod holds the data directory's lock.
    case inUse(directory: String)
    /// `kvod restore`: the data directory holds a database, and `--replace` was not given.
    case databaseExists(String)
    /// `kvod restore`: the backup to restore is not a whole kvod database (its `integrity_check` verdict, or why).
    case notABackup(String, String)
    /// `kvod restore`: the file given is the data directory's database itself.
    case ownDatabase(String)
    /// `kvod verify`: the file is not a whole kvod backup this kvod can restore (why).
    case notVerified(String, String)

    package var description: String {
        switch self {
        case let .noDatabase(directory):
            return "'\(directory)' holds no kvod database (\(SQLiteStore.fileName) is missing or empty): give kvod's --data directory"
        case let .destinationExists(path):
            return "'\(path)' exists: a backup never replaces a file; name a new one"
        case let .cannotWrite(path, reason):
            return "cannot write '\(path)': \(reason)"
        case let .storage(error):
            return error.description
        case let .damagedCopy(path, verdict):
            return "the copy '\(path)' did not read back whole (\(verdict)); it was removed"
        case let .inUse(directory):
            return "'\(directory)' is in use by a running kvod: stop it first (a backup can be taken while it runs; a restore cannot)"
        case let .databaseExists(path):
            return "'\(path)' holds a database: pass --replace to set it aside (renamed, never deleted) and restore over it"
        case let .notABackup(path, reason):
            return "'\(path)' is not a whole kvod database (\(reason)): nothing was restored"
        case let .notVerified(path, reason):
            return "'\(path)' is not a whole kvod database (\(reason))"
        case let .ownDatabase(path):
            return "'\(path)' is the data directory's own database, not a backup: nothing was restored"
        }
    }
}
