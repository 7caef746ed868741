/// What a failed commit left behind (`Store.assess`): what the server does next depends on it
/// (docs/design.md, "When the store cannot write"). A value; any thread.
enum StorageFailure: Equatable {
    /// The file system had no room (SQLITE_FULL, ENOSPC, EDQUOT). The transaction was rolled back: the
    /// database holds what the last commit left.
    case outOfSpace(String)
    /// Another failure after which the database provably holds what the last commit left (the transaction
    /// was rolled back, nothing was written past it): read-only, locked, a file that cannot be opened.
    case consistent(String)
    /// A failure that may have left part of the transaction on disk, or a database that is damaged (an
    /// I/O error, which may come from a failed fsync; corruption; a rollback that failed): the server
    /// cannot know what a restart would find, and stops.
    case unknown(String)
}
