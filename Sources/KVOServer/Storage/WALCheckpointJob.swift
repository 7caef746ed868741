import CLibUV
import CSQLite
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
import KVOEngine
import KVOModel
#endif

/// Copies the WAL into the database file off the loop thread: a `PRAGMA wal_checkpoint(PASSIVE)` on a
/// second SQLite connection of its own, run on the libuv thread pool (`uv_queue_work`), so that the
/// copying and the fsyncs of a checkpoint never run inside a group commit (docs/design.md, "Durability").
///
/// A passive checkpoint takes no lock the writer needs: the loop thread keeps committing meanwhile, and
/// copies what was committed before it started. `SQLiteStore.afterCommit(on:)` queues one job at a time (`isRunning`).
///
/// Threads: created, started and finished on the loop thread. Its connection (`database`) is used by
/// `run()` on a pool thread between `start` and the after-work callback, and by the loop thread only
/// while no job is queued (`close()`); libuv orders `run()` before the after-work callback, so the two
/// never overlap. `@unchecked Sendable` for that hand-over alone: nothing else crosses threads.
final class WALCheckpointJob: @unchecked Sendable {
    /// The checkpoint's own connection to the store's database (never used for anything else).
    private let database: SQLiteDatabase
    /// A pause before each checkpoint, in microseconds: 0, except in tests of the blocking fallback,
    /// which make background checkpoints fall behind (`KVOD_TEST_CHECKPOINT_DELAY_MS`).
    private let delayMicroseconds: UInt32
    /// Whether a job is queued or running. Loop thread.
    private(set) var isRunning = false
    /// The last checkpoint's outcome, set by `run()` and read on the loop thread after it.
    private(set) var lastResult: (code: Int32, walFrames: Int, checkpointedFrames: Int) = (SQLITE_OK, 0, 0)
    /// Whether the last checkpoint ran (`SQLITE_OK`; it may still have left frames to copy).
    var lastCheckpointSucceeded: Bool { lastResult.code == SQLITE_OK }
    /// Checkpoints completed. Loop thread.
    private(set) var completed = 0
    private var finished: ((WALCheckpointJob) -> Void)?

    /// Opens the second connection to `path` (the store's database, already in WAL mode).
    init(databasePath path: String, delayMilliseconds: Int) throws(StorageError) {
        database = try SQLiteDatabase(path: path)
        database.setBusyTimeout(milliseconds: 0)
        // A connection learns that the database is in WAL mode when it first reads it; until then a
        // checkpoint on it does nothing (SQLite reports -1 frames).
        try database.exec("SELECT count(*) FROM sqlite_master")
        delayMicroseconds = UInt32(clamping: max(0, delayMilliseconds) * 1000)
    }

    /// Queues one checkpoint on `loop`'s thread pool; `finished` runs on the loop thread when it is done.
    /// Does nothing while one is running. Loop thread.
    func start(on loop: UnsafeMutablePointer<uv_loop_t>, finished: @escaping (WALCheckpointJob) -> Void) {
        guard !isRunning, database.isOpen else { return }
        let work = UnsafeMutablePointer<uv_work_t>.allocate(capacity: 1)
        work.initialize(to: uv_work_t())
        work.pointee.data = Unmanaged.passRetained(self).toOpaque()
        self.finished = finished
        isRunning = true
        if uv_queue_work(loop, work, WALCheckpointJob.workCallback, WALCheckpointJob.afterWorkCallback) != 0 {
            Unmanaged<WALCheckpointJob>.fromOpaque(work.pointee.data).release()
            work.deallocate()
            isRunning = false
            self.finished = nil
        }
    }

    /// Closes the connection. Loop thread, with no job running (the server closes the store after its
    /// loop has run dry, and a queued job keeps the loop running). Idempotent.
    func close() {
        precondition(!isRunning, "WALCheckpointJob.close() while a checkpoint runs")
        database.close()
    }

    /// Thread pool: the checkpoint itself.
    private func run() {
        if delayMicroseconds > 0 { usleep(delayMicroseconds) }
        lastResult = database.checkpoint(mode: SQLITE_CHECKPOINT_PASSIVE)
    }

    private static let workCallback: uv_work_cb = { work in
        Unmanaged<WALCheckpointJob>.fromOpaque(work!.pointee.data).takeUnretainedValue().run()
    }

    private static let afterWorkCallback: uv_after_work_cb = { work, _ in
        let job = Unmanaged<WALCheckpointJob>.fromOpaque(work!.pointee.data).takeRetainedValue()
        work!.deallocate()
        job.isRunning = false
        job.completed += 1
        let finished = job.finished
        job.finished = nil
        finished?(job)
    }
}
