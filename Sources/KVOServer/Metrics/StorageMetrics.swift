/// The store's side of `/metrics`: whether it takes writes (`StorageHealth`), what failed how often, and
/// the bytes `--max-disk` counts. Part of `ServerMetrics`; loop thread only, plain integers.
struct StorageMetrics {
    /// What went wrong with the store (the `kind` label of `kvod_storage_errors_total`).
    enum ErrorKind: Int, CaseIterable {
        /// A commit or probe found no room (SQLITE_FULL, ENOSPC), or the files passed `--max-disk`.
        case full
        /// Another failure that left the database as the last commit left it.
        case io
        /// A failure that may have left part of a transaction behind (kvod stops).
        case unknown
        /// The database file deleted or replaced under the server.
        case lost

        var label: String {
            switch self {
            case .full: "full"
            case .io: "io"
            case .unknown: "unknown"
            case .lost: "lost"
            }
        }
    }

    /// `StorageHealth.gaugeValue`.
    var health = 0
    /// `--max-disk`'s count (database and WAL on disk), as last measured; 0 without the limit.
    var bytesOnDisk = 0
    private var errors = [UInt64](repeating: 0, count: ErrorKind.allCases.count)
    private(set) var rollbacks: UInt64 = 0

    mutating func failed(_ kind: ErrorKind) { errors[kind.rawValue] += 1 }
    mutating func rolledBack() { rollbacks += 1 }

    /// The families, into `out`; `maximumDiskBytes` 0: no `--max-disk` (its two gauges are left out).
    func render(into out: inout PrometheusExposition, maximumDiskBytes: Int) {
        out.family("kvod_storage_state", type: .gauge,
                   help: "0 writable; 1 full (disk or --max-disk); 2 failing (a commit failed, the store is consistent); 3 lost (the database file was deleted or replaced). Not 0: writes refused (storage_full, storage_unavailable), /readyz 503.")
        out.sample("kvod_storage_state", health)
        out.family("kvod_storage_errors_total", type: .counter,
                   help: "Storage failures by kind: full (no room), io (a failure that left the store consistent), unknown (kvod stopped), lost (the database file gone).")
        for kind in ErrorKind.allCases {
            out.sample("kvod_storage_errors_total", labels: [("kind", kind.label)], errors[kind.rawValue])
        }
        out.family("kvod_storage_rollbacks_total", type: .counter,
                   help: "Times a failed commit was undone: the server's state rolled back to the last commit and its client connections closed.")
        out.sample("kvod_storage_rollbacks_total", rollbacks)
        if maximumDiskBytes > 0 {
            out.family("kvod_storage_max_disk_bytes", type: .gauge, help: "--max-disk: most bytes the database and its WAL may take.")
            out.sample("kvod_storage_max_disk_bytes", maximumDiskBytes)
            out.family("kvod_storage_disk_bytes", type: .gauge, help: "Bytes the database and its WAL take on disk, as --max-disk counts them.")
            out.sample("kvod_storage_disk_bytes", bytesOnDisk)
        }
    }
}
