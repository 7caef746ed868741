/// The store's upkeep in `/metrics`: backups over the network (`backup`: how many, the last one's time, revision
/// and size) and space given back (`compact` and the automatic incremental vacuum). Part of `ServerMetrics`; loop
/// thread only, plain numbers.
struct MaintenanceMetrics {
    /// Backups streamed whole to a client (its last chunk sent), and those that ended otherwise (the copy failed,
    /// the client went away or stopped asking).
    var backupsCompleted: UInt64 = 0
    var backupsFailed: UInt64 = 0
    /// The last backup streamed whole (`BackupRecord`), nil before the first.
    var lastBackup: BackupRecord?
    /// `compact` requests answered, and pages given back to the file system (by them and automatically).
    var compactions: UInt64 = 0
    var pagesReclaimed: UInt64 = 0

    /// The families, into `out`.
    func render(into out: inout PrometheusExposition) {
        out.family("kvod_backups_total", type: .counter,
                   help: "Backups over the network (backup), by result: completed (streamed whole) or failed (the copy failed, or the client went away or stopped asking).")
        out.sample("kvod_backups_total", labels: [("result", "completed")], backupsCompleted)
        out.sample("kvod_backups_total", labels: [("result", "failed")], backupsFailed)
        if let last = lastBackup {
            out.family("kvod_backup_last_timestamp_seconds", type: .gauge,
                       help: "When the last backup over the network was streamed whole, in seconds since the epoch.")
            out.sample("kvod_backup_last_timestamp_seconds", Double(last.finishedAtMilliseconds) / 1000)
            out.family("kvod_backup_last_revision", type: .gauge, help: "The revision the last backup over the network holds.")
            out.sample("kvod_backup_last_revision", last.revision)
            out.family("kvod_backup_last_bytes", type: .gauge, help: "The size of the last backup over the network, in bytes.")
            out.sample("kvod_backup_last_bytes", last.bytes)
        }
        out.family("kvod_compactions_total", type: .counter, help: "compact requests carried out.")
        out.sample("kvod_compactions_total", compactions)
        out.family("kvod_storage_pages_reclaimed_total", type: .counter,
                   help: "Free database pages given back to the file system (compact and the automatic incremental vacuum).")
        out.sample("kvod_storage_pages_reclaimed_total", pagesReclaimed)
    }
}

/// The last backup a server streamed whole (`Server.lastBackup`, `kvod_backup_last_*`): when, at which revision, how
/// large. A value; any thread.
package struct BackupRecord: Equatable, Sendable {
    /// Wall-clock time (the server's `ServerClock`) when its last chunk was sent, in milliseconds since the epoch.
    package let finishedAtMilliseconds: UInt64
    /// The store's revision in the copy.
    package let revision: UInt64
    package let objects: Int
    package let bytes: Int
}
