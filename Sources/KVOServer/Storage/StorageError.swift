import KVOEngine
import KVOModel

/// Why the persistent store could not open, read or write its database.
///
/// A value type; any thread may inspect or print it. `description` is a complete sentence fit for the
/// daemon's log and for its exit message.
public enum StorageError: Error, Equatable, CustomStringConvertible {
    /// The data directory (or one of its parents) could not be created or is not a directory.
    case directory(path: String, reason: String)
    /// Another connection, normally another kvod process, holds the database open.
    case locked(path: String)
    /// The database was written by a newer kvod whose schema this one does not know.
    case unsupportedSchema(path: String, found: Int64, supported: Int64)
    /// A stored row does not decode: `row` names it (`object 'a'`, `history rev 12`, `class 'LabColor'`,
    /// `binding 7`, `meta revision`).
    case corrupt(row: String, reason: String)
    /// An existing database lacks a table every kvod database has (`table`): it is damaged, or not
    /// kvod's. kvod refuses to start over it rather than start empty.
    case missingTable(path: String, table: String)
    /// SQLite reported an error; `message` is `sqlite3_errmsg` (or `sqlite3_errstr`) of it.
    case sqlite(code: Int32, message: String, during: String)
    /// The store was used after `close()`.
    case closed
    /// The database file cannot be opened or written for a reason outside kvod: permissions, a
    /// read-only file system, a full disk, an I/O error, a file that is not a SQLite database.
    /// `reason` says which in words, followed by SQLite's code and message.
    case unusableDatabase(path: String, reason: String)
    /// The database file is missing (`missing`) or empty in a data directory that held one: `traces` names
    /// the files that show it (`LostDatabaseCheck`). kvod refuses to start empty over it unless `--init`.
    case lostDatabase(path: String, missing: Bool, traces: [String])

    public var description: String {
        switch self {
        case let .directory(path, reason):
            return "cannot use data directory '\(path)': \(reason)"
        case let .locked(path):
            return "cannot use the database '\(path)': it is in use by another process (is another kvod running with the same --data?)"
        case let .unsupportedSchema(path, found, supported):
            return "cannot use the database '\(path)': it has schema version \(found), written by a newer kvod (this one reads versions 1 to \(supported)): run that kvod or a newer one"
        case let .corrupt(row, reason):
            return "corrupt database row (\(row)): \(reason)"
        case let .missingTable(path, table):
            return "cannot use the database '\(path)': it has no '\(table)' table: it is damaged or was not written by kvod (move it away to start with an empty store)"
        case let .sqlite(code, message, during):
            return "SQLite error \(code) while \(during): \(message)"
        case .closed:
            return "the persistent store is closed"
        case let .unusableDatabase(path, reason):
            return "cannot use the database '\(path)': \(reason)"
        case let .lostDatabase(path, missing, traces):
            let state = missing ? "it is missing" : "it is empty (0 bytes)"
            let evidence = traces.joined(separator: ", ") + (traces.count == 1 ? " is" : " are")
            return "cannot use the database '\(path)': \(state), but this data directory held one (\(evidence) there): "
                + "was it deleted, or did a restore fail? Restore it from a backup, or pass --init to start with an empty store"
        }
    }
}
