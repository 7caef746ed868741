import CLibUV
import CSQLite

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Giving free pages back to the file system (docs/design.md, "Reclaiming space"): the database is in SQLite's
/// incremental auto-vacuum mode, so that `PRAGMA incremental_vacuum(N)` moves up to N pages from the end of the file
/// into free pages and cuts the file short, a bounded step the server spreads over housekeeping ticks (automatically)
/// or loop turns (`compact`). Loop thread, like the rest of `SQLiteStore`.
///
/// SQLite takes the mode only before the first table is created, or with a `VACUUM`: a new database is created
/// with it; a database of an older kvod is switched once, when it is opened (`switchToIncrementalVacuum`), by a
/// `VACUUM` before the server serves (it rewrites the whole file once, through the WAL, and needs about the
/// database's size free). When that fails (no room), the database is served as it is, said in `openingNotes`, and
/// the next start tries again; meanwhile `compact` answers that the database cannot give pages back.
extension SQLiteStore {
    /// The most pages one step gives back (2 MiB of 4 KiB pages): a few milliseconds of the loop.
    static let reclaimStepPages = 512

    /// The database's pages now: the file's pages, the free ones among them, and whether it is in incremental
    /// auto-vacuum mode (it can give them back). Three pragmas that read the header: microseconds.
    func pageCounts() throws(StorageError) -> StorePages {
        let pages = Int(try queryText("PRAGMA page_count")) ?? 0
        let free = Int(try queryText("PRAGMA freelist_count")) ?? 0
        let mode = try queryText("PRAGMA auto_vacuum")
        return StorePages(pageSize: pageSize, pages: pages, freePages: free, incremental: mode == "2")
    }

    /// One step: gives back up to `pages` free pages (`PRAGMA incremental_vacuum`, its own transaction, written and
    /// synced through the WAL like a commit). The file shrinks once the WAL is checkpointed. Returns the pages after
    /// it. Never inside a group commit (the server calls it between loop turns, no transaction open).
    func reclaimSpace(pages: Int) throws(StorageError) -> StorePages {
        guard let database else { throw .closed }
        precondition(!database.isInTransaction, "reclaimSpace inside a transaction")
        try database.exec("PRAGMA incremental_vacuum(\(max(1, pages)))")
        return try pageCounts()
    }

    /// After the last step of a `compact`: the WAL copied into the database and truncated
    /// (`checkpointBlocking`), so that the file is cut short now and the WAL takes no room. Whether it was.
    func shrinkLog() -> Bool {
        checkpointBlocking()
    }

    /// Before the schema: a database without tables is given incremental auto-vacuum (it can only be set now).
    static func prepareIncrementalVacuum(_ database: SQLiteDatabase) throws(StorageError) {
        let query = try database.prepare("SELECT count(*) FROM sqlite_schema")
        let isEmpty = try query.step() && query.int64(0) == 0
        query.finalize()
        if isEmpty { try database.exec("PRAGMA auto_vacuum = INCREMENTAL") }
    }

    /// After the schema, before the statements are compiled: a database of an older kvod (auto-vacuum off) is
    /// switched with a one-time `VACUUM`. Returns the note for the log: what it did, or why it could not.
    func switchToIncrementalVacuum(_ database: SQLiteDatabase) -> String? {
        do throws(StorageError) {
            let mode = try database.prepare("PRAGMA auto_vacuum")
            let current = try mode.step() ? mode.int64(0) : 0
            mode.finalize()
            guard current != 2 else { return nil }
            let started = uv_hrtime()
            try database.exec("PRAGMA auto_vacuum = INCREMENTAL")
            try database.exec("VACUUM")
            let milliseconds = (uv_hrtime() - started) / 1_000_000
            return "'\(databasePath)' was made by an older kvod without incremental vacuum: switched once (a VACUUM of the "
                + "whole file, \(milliseconds) ms); freed pages are now given back to the file system (kvoclient compact)"
        } catch {
            return "'\(databasePath)' could not be switched to incremental vacuum (\(error)): it is served as it is, freed "
                + "pages stay in the file until a start with about the database's size free on its file system switches it"
        }
    }
}

/// The pages of a store's database (`SQLiteStore.pageCounts`). A value; any thread.
struct StorePages: Equatable {
    var pageSize: Int
    var pages: Int
    var freePages: Int
    /// Whether the database is in incremental auto-vacuum mode: its free pages can be given back.
    var incremental: Bool

    var bytes: Int { pages &* pageSize }
    var freeBytes: Int { freePages &* pageSize }
}
