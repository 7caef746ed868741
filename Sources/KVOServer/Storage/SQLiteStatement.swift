import CSQLite
import KVOEngine
import KVOModel

/// A prepared SQLite statement: bind parameters (1-based), step through rows, read columns (0-based),
/// reset for the next use.
///
/// Owned by whoever prepared it (`SQLiteStore` keeps its statements for its whole life, so a commit
/// never re-compiles SQL). Same thread rule as its `SQLiteDatabase`: one thread at a time, in kvod the
/// loop thread. Text is bound with `SQLITE_TRANSIENT` (SQLite copies it), so the caller's buffers may
/// change as soon as a bind returns. Column text is only valid until the next `step`, `reset` or
/// `finalize`.
final class SQLiteStatement {
    private var handle: OpaquePointer?
    /// Kept alive so that the connection outlives its statements.
    private let database: SQLiteDatabase
    let sql: String

    init(handle: OpaquePointer, database: SQLiteDatabase, sql: String) {
        self.handle = handle
        self.database = database
        self.sql = sql
    }

    deinit {
        finalize()
    }

    /// Releases the compiled statement. Idempotent.
    func finalize() {
        guard let handle else { return }
        sqlite3_finalize(handle)
        self.handle = nil
    }

    // MARK: - Binding

    func bind(_ index: Int32, _ value: Int64) throws(StorageError) {
        try check(sqlite3_bind_int64(try live(), index, value), binding: index)
    }

    func bindNull(_ index: Int32) throws(StorageError) {
        try check(sqlite3_bind_null(try live(), index), binding: index)
    }

    /// Binds UTF-8 text given as bytes (SQLite copies them).
    func bind(_ index: Int32, text bytes: [UInt8]) throws(StorageError) {
        let handle = try live()
        let code = bytes.withUnsafeBufferPointer { buffer in
            bindText(handle, index, buffer.baseAddress, buffer.count)
        }
        try check(code, binding: index)
    }

    /// Binds text (SQLite copies it).
    func bind(_ index: Int32, text: String) throws(StorageError) {
        let handle = try live()
        var text = text
        let code = text.withUTF8 { buffer in bindText(handle, index, buffer.baseAddress, buffer.count) }
        try check(code, binding: index)
    }

    // MARK: - Running

    /// Advances to the next row: true when a row is available, false when the statement is done.
    func step() throws(StorageError) -> Bool {
        let code = sqlite3_step(try live())
        switch code {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw database.error(code, during: "running \(sql)")
        }
    }

    /// Runs a statement that returns no rows, then resets it (bindings cleared).
    func run() throws(StorageError) {
        defer { reset() }
        while try step() {}
    }

    /// Makes the statement ready to run again and clears its bindings.
    func reset() {
        guard let handle else { return }
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    // MARK: - Columns of the current row

    func isNull(_ column: Int32) -> Bool {
        guard let handle else { return true }
        return sqlite3_column_type(handle, column) == SQLITE_NULL
    }

    /// True when the column holds an integer (not text, a real, a blob or NULL).
    func isInteger(_ column: Int32) -> Bool {
        guard let handle else { return false }
        return sqlite3_column_type(handle, column) == SQLITE_INTEGER
    }

    /// True when the column holds text (not an integer, a real, a blob or NULL).
    func isText(_ column: Int32) -> Bool {
        guard let handle else { return false }
        return sqlite3_column_type(handle, column) == SQLITE_TEXT
    }

    func int64(_ column: Int32) -> Int64 {
        guard let handle else { return 0 }
        return sqlite3_column_int64(handle, column)
    }

    /// The column as UTF-8 bytes, without copying; valid until the next `step`, `reset` or `finalize`.
    /// Empty for NULL.
    func textBytes(_ column: Int32) -> UnsafeBufferPointer<UInt8> {
        guard let handle, let start = sqlite3_column_text(handle, column) else {
            return UnsafeBufferPointer(start: nil, count: 0)
        }
        return UnsafeBufferPointer(start: start, count: Int(sqlite3_column_bytes(handle, column)))
    }

    /// The column as a string (invalid UTF-8 repaired); empty for NULL.
    func string(_ column: Int32) -> String {
        String(decoding: textBytes(column), as: UTF8.self)
    }

    // MARK: - Helpers

    private func live() throws(StorageError) -> OpaquePointer {
        guard let handle, database.isOpen else { throw .closed }
        return handle
    }

    private func check(_ code: Int32, binding index: Int32) throws(StorageError) {
        guard code == SQLITE_OK else { throw database.error(code, during: "binding parameter \(index) of \(sql)") }
    }
}

/// `SQLITE_TRANSIENT`: SQLite copies the bound bytes before the bind returns.
private let transientDestructor = unsafeBitCast(-1 as Int, to: sqlite3_destructor_type.self)

/// Binds `count` bytes of UTF-8 at `start` (an empty, non-NULL text when `start` is nil).
private func bindText(_ handle: OpaquePointer, _ index: Int32, _ start: UnsafePointer<UInt8>?, _ count: Int) -> Int32 {
    guard count <= Int(Int32.max) else { return SQLITE_TOOBIG }
    guard let start else { return sqlite3_bind_text(handle, index, "", 0, transientDestructor) }
    return start.withMemoryRebound(to: CChar.self, capacity: count) { pointer in
        sqlite3_bind_text(handle, index, pointer, Int32(count), transientDestructor)
    }
}
