import CSQLite

/// Edits a kvod database file directly, as a damaged disk or a careless person would: for the tests
/// that start kvod over a corrupt store. Only while no kvod has the file open (kvod holds it locked).
///
/// The one place the integration tests reach past kvod into its SQLite file, and only for what neither kvod
/// nor the store's API ever writes: damaged rows and counters near their maximum (`CorruptStoreTests`), and a
/// database of an older schema (`UserCommandsTests`, migration). Everything else goes through kvod.
enum SQLiteFile {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// Runs `sql` (one or more statements) on the database at `path` (created when `creating`: a database that is
    /// not kvod's).
    static func execute(_ sql: String, at path: String, creating: Bool = false) throws {
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | (creating ? SQLITE_OPEN_CREATE : 0)
        guard sqlite3_open_v2(path, &handle, flags, nil) == SQLITE_OK, let handle else {
            sqlite3_close(handle)
            throw Failure(description: "cannot open \(path)")
        }
        defer { sqlite3_close(handle) }
        var message: UnsafeMutablePointer<CChar>?
        guard sqlite3_exec(handle, sql, nil, nil, &message) == SQLITE_OK else {
            let text = message.map { String(cString: $0) } ?? "unknown error"
            sqlite3_free(message)
            throw Failure(description: "\(sql): \(text)")
        }
    }
}
