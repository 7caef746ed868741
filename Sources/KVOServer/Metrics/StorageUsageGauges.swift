import KVOEngine
import KVOModel

/// The `kvod_storage_*_bytes` gauges: what the store's files take and the room left on their file system,
/// as the server read them from its store when `/metrics` was scraped (`Store.usage()`; this layer does not
/// see the store). Absent with `--in-memory` (no files); a figure that could not be read (a file or the
/// directory gone) is left out.
///
/// A value; made and rendered on the loop thread.
struct StorageUsageGauges {
    var databaseBytes: Int?
    var walBytes: Int?
    var freeBytes: Int?
    var sizeBytes: Int?

    func render(into out: inout PrometheusExposition) {
        let families: [(String, String, Int?)] = [
            ("kvod_storage_database_bytes", "Size of the database file (--data).", databaseBytes),
            ("kvod_storage_wal_bytes", "Size of the database's write-ahead log (0 after a truncating checkpoint).", walBytes),
            ("kvod_storage_free_bytes", "Bytes kvod may still write on the data directory's file system (statvfs f_bavail * f_frsize).", freeBytes),
            ("kvod_storage_size_bytes", "Size of the data directory's file system (statvfs f_blocks * f_frsize).", sizeBytes),
        ]
        for (name, help, value) in families {
            guard let value else { continue }
            out.family(name, type: .gauge, help: help)
            out.sample(name, value)
        }
    }
}
