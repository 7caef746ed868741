/// What a store's files take and what room their file system has left, read when `/metrics` is scraped
/// (`Store.usage()`): `kvod_storage_database_bytes`, `kvod_storage_wal_bytes`, `kvod_storage_free_bytes` and
/// `kvod_storage_size_bytes`.
///
/// Each figure is nil when it could not be read (a file or the directory gone: the store's health, not this,
/// says what that means). A value; any thread.
struct StorageUsage: Equatable {
    /// The database file's size (`st_size`).
    var databaseBytes: Int?
    /// The write-ahead log's size (`st_size` of `<database>-wal`); 0 when there is none (after a clean close
    /// or a truncating checkpoint).
    var walBytes: Int?
    /// What an unprivileged process may still write on the data directory's file system (`statvfs`:
    /// `f_bavail * f_frsize`).
    var freeBytes: Int?
    /// The data directory's file system's size (`f_blocks * f_frsize`).
    var sizeBytes: Int?
}
