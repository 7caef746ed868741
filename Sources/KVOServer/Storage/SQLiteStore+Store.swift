import CLibUV
import Logging
import KVOEngine
import KVOModel

/// `SQLiteStore` as the server's `Store`: restoring, and the WAL's upkeep after each group commit (the
/// background checkpoint on the thread pool, and the report of the blocking fallback that `commit` ran),
/// which the server knows only as `afterCommit(on:)` and the notice it logs.
extension SQLiteStore: Store {
    var keepsWrites: Bool { true }

    /// SQLite's errors name the file and the cause (`describingOpenFailure`): a database damaged past its
    /// first pages is found only here, reading the rows.
    func restore() throws(StorageError) -> StoreContents {
        do throws(StorageError) {
            let state = try load()
            let users = try loadUsers()
            let clusterStream = try readClusterStream()
            let streamSequence = try readStreamSequence()
            return StoreContents(state: state, users: users, clusterStream: clusterStream, streamSequence: streamSequence,
                                 streamIntegrity: try readStreamIntegrity(), sessions: try loadSessions())
        } catch {
            throw SQLiteStore.describingOpenFailure(error, databasePath: databasePath)
        }
    }

    var logMetadata: Logger.Metadata { ["database": "\(databasePath)", "sync": "\(sync.rawValue)"] }

    /// The partial copy is `<data>/kvod.network-backup.partial`: one at a time (`BackupTransfers`), removed when its
    /// transfer ends, and at start-up when a stop left it (`Server.startOwnHandles`).
    var backupFiles: (database: String, partial: String)? {
        (databasePath, directory + "/" + SQLiteStore.networkBackupFileName)
    }

    /// The partial copy of the server's `backup` operation, in the data directory.
    static let networkBackupFileName = "kvod.network-backup.partial"

    func pages() -> StorePages? {
        try? pageCounts()
    }

    /// Opens the second connection that background checkpoints use (`WALCheckpointJob`), so that
    /// `afterCommit(on:)` queues them. The server's store only (`ServerConfiguration.openStore()`); without
    /// it (`kvod user`, kvod-bench, tests) only the blocking fallback inside `commit` bounds the WAL.
    /// `delayMilliseconds`: a pause before each checkpoint, for tests of the blocking fallback only.
    func startBackgroundCheckpoints(delayMilliseconds: Int) throws(StorageError) {
        backgroundCheckpoint = try makeCheckpointJob(delayMilliseconds: delayMilliseconds)
    }

    /// After a group commit: a passive checkpoint on the thread pool once the WAL holds
    /// `walCheckpointStartBytes` (one at a time; when one ends and the WAL still needs one, the next
    /// commit queues it). When the commit took the WAL past `--wal-limit` (checkpoints not keeping up),
    /// `commit` ran the blocking fallback itself (`blockingCheckpoint`): reported here, at most once a
    /// second, the rest counted.
    func afterCommit(on loop: UnsafeMutablePointer<uv_loop_t>) -> StoreNotice? {
        var notice: StoreNotice?
        if let fallback = blockingCheckpoint, let count = blockingCheckpointLog.record(at: clock.nanoseconds / 1_000_000) {
            let what = count == 1 ? "a blocking checkpoint" : "\(count) blocking checkpoints"
            if fallback.emptied {
                notice = StoreNotice(level: .warning, message: "the WAL passed --wal-limit (\(fallback.walBytes) bytes, limit \(walLimitBytes)): \(what) on the event loop; background checkpoints are not keeping up with the writes")
            } else if blockingCheckpointHeldByReaders {
                notice = StoreNotice(level: .warning, message: "the WAL passed --wal-limit (\(fallback.walBytes) bytes, limit \(walLimitBytes)) while another process reads the database (kvod backup?): not waiting for it; the WAL grows until it ends, trying again every second")
            } else {
                notice = StoreNotice(level: .error, message: "the WAL passed --wal-limit (\(fallback.walBytes) bytes, limit \(walLimitBytes)) and \(what) could not empty it within 10 s; trying again after the next commit")
            }
        }
        if checkpointNeed != .none {
            backgroundCheckpoint?.start(on: loop) { _ in }
        }
        return notice
    }
}
