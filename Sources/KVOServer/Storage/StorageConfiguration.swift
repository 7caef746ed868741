import KVOEngine
import KVOModel

/// Durable storage settings (`--data`), the `SQLiteStore`'s: a data directory (created if missing), the sync
/// mode and the WAL's bound. A value; any thread.
public struct StorageConfiguration: Sendable {
    public var directory: String
    public var sync: SyncMode
    /// The WAL's hard bound (`--wal-limit`): past it a checkpoint runs on the event loop, blocking
    /// (docs/design.md, "Durability"). Background checkpoints start at 1/16 of it.
    public var walLimitBytes: Int
    /// Tests only (`KVOD_TEST_CHECKPOINT_DELAY_MS`): a pause before each background checkpoint, so that
    /// they fall behind and the blocking fallback runs. 0 otherwise.
    public var checkpointTestDelayMilliseconds: Int
    /// Bytes held in reserve for a full disk (`--disk-reserve`, `DiskReserve`); nil: 64 MiB, at most 1/20 of
    /// the file system; 0: none.
    public var reserveBytes: Int? = nil
    /// Most bytes the database and its WAL may take on disk (`--max-disk`); past it writes are refused
    /// (`storage_full`). 0: no limit.
    public var maximumDiskBytes = 0
    /// `--init`: where the directory held a database whose file is now missing or empty, start with a new,
    /// empty one instead of refusing (`LostDatabaseCheck`). Changes nothing where the database is there.
    public var replacesLostDatabase = false
    /// The least time between the starts of two group commits while writes keep arriving, in microseconds
    /// (`KVOD_GROUP_COMMIT_INTERVAL_US`; 0: one group commit every loop iteration that wrote, as before).
    /// A write after a quieter spell is committed at the end of its own iteration; under a steady stream
    /// the writes of the next `groupCommitIntervalMicroseconds` wait for one commit together, and so does
    /// every reply and event about them (docs/design.md, "Durability").
    public var groupCommitIntervalMicroseconds = StorageConfiguration.defaultGroupCommitIntervalMicroseconds

    /// The default `walLimitBytes` (`kvod --wal-limit`): 64 MiB.
    public static let defaultWALLimitBytes = 64 << 20
    /// The default `groupCommitIntervalMicroseconds` (docs/performance.md, issue 28, "The durable tail").
    public static let defaultGroupCommitIntervalMicroseconds = 500

    public init(directory: String, sync: SyncMode = .normal, walLimitBytes: Int = StorageConfiguration.defaultWALLimitBytes,
                checkpointTestDelayMilliseconds: Int = 0) {
        self.directory = directory
        self.sync = sync
        self.walLimitBytes = walLimitBytes
        self.checkpointTestDelayMilliseconds = checkpointTestDelayMilliseconds
    }
}
