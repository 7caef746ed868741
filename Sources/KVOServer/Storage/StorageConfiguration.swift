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

    /// The default `walLimitBytes` (`kvod --wal-limit`): 64 MiB.
    public static let defaultWALLimitBytes = 64 << 20

    public init(directory: String, sync: SyncMode = .normal, walLimitBytes: Int = StorageConfiguration.defaultWALLimitBytes,
                checkpointTestDelayMilliseconds: Int = 0) {
        self.directory = directory
        self.sync = sync
        self.walLimitBytes = walLimitBytes
        self.checkpointTestDelayMilliseconds = checkpointTestDelayMilliseconds
    }
}
