import CLibUV
import Foundation
import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// The store's WAL checkpoints (issue 13): none inside a commit, a passive one on a second connection on
/// the thread pool (`WALCheckpointJob`), and the blocking fallback past `walLimitBytes`, with nothing lost.
@Suite struct WALCheckpointTests {
    private typealias F = StorageFixtures
    private static let limit = 1 << 20

    private func open(_ directory: TemporaryDirectory) throws -> SQLiteStore {
        try SQLiteStore(directory: directory.path, sync: .normal, historyLimit: 1000, historyByteLimit: 1 << 30,
                            walLimitBytes: Self.limit)
    }

    private func walFileBytes(_ store: SQLiteStore) -> Int {
        (try? FileManager.default.attributesOfItem(atPath: store.databasePath + "-wal")[.size] as? Int) ?? 0
    }

    /// Commits one write of a 1 KB string per revision from `rev` until `stop` says so; returns the next revision.
    private func commit(_ store: SQLiteStore, from rev: UInt64, until stop: (SQLiteStore) -> Bool) throws -> UInt64 {
        var rev = rev
        let padding = String(repeating: "w", count: 1_000)
        while !stop(store) {
            try store.commit(F.batch([F.entry(rev, "object-\(rev % 50)", ["n": .int(Int64(rev)), "pad": .string(padding)])]))
            rev += 1
            if rev > 100_000 { Issue.record("the WAL never reached the point asked for"); break }
        }
        return rev
    }

    @Test func commitsNeverCheckpointUntilTheLimitThenTheCommitPastItEmptiesTheWALAndNothingIsLost() throws {
        let directory = TemporaryDirectory()
        let store = try open(directory)
        expectEqual(store.checkpointNeed, .none)
        var rev = try commit(store, from: 1) { $0.checkpointNeed != .none }
        expectEqual(store.checkpointNeed, .background)
        #expect(store.walBytes >= Self.limit / 16)
        // No automatic checkpoint: the WAL only grows, commit after commit, until one takes it past the limit.
        var largest = 0
        rev = try commit(store, from: rev) { store in
            if store.blockingCheckpoint != nil { return true }
            #expect(store.walBytes > largest, "the WAL never shrinks before the limit")
            largest = store.walBytes
            #expect(walFileBytes(store) >= store.walBytes)
            return false
        }
        #expect(largest > Self.limit / 2)
        let fallback = try #require(store.blockingCheckpoint)
        #expect(fallback.walBytes > Self.limit && fallback.emptied)
        #expect(store.walBytes == 0 && walFileBytes(store) == 0)
        expectEqual(store.checkpointNeed, .none)
        // The next commit runs none.
        try store.commit(F.batch([F.entry(rev, "object-0", ["n": .int(Int64(rev))])]))
        #expect(store.blockingCheckpoint == nil)
        let state = try reopen(directory, closing: store)
        expectEqual(state.revision, rev)
        expectEqual(state.objects["object-0"], ["n": .int(Int64(rev))])
        expectEqual(state.objects.count, Set((1...rev).map { $0 % 50 }).count)
    }

    @Test func aBackgroundCheckpointOnTheThreadPoolCopiesTheWALWhileTheStoreStaysOpen() throws {
        let directory = TemporaryDirectory()
        let store = try open(directory)
        let rev = try commit(store, from: 1) { $0.checkpointNeed == .background }
        let job = try store.makeCheckpointJob()
        var loop = uv_loop_t()
        expectEqual(uv_loop_init(&loop), 0)
        var finishedOnLoop = false
        job.start(on: &loop) { _ in finishedOnLoop = true }
        #expect(job.isRunning)
        uv_run(&loop, UV_RUN_DEFAULT)
        #expect(finishedOnLoop && !job.isRunning && job.completed == 1)
        #expect(job.lastCheckpointSucceeded)
        #expect(job.lastResult.walFrames > 0 && job.lastResult.checkpointedFrames == job.lastResult.walFrames,
                "\(job.lastResult)")
        // Everything was copied: the next commit starts the WAL again from its beginning.
        try store.commit(F.batch([F.entry(rev, "after", ["n": 1])]))
        expectEqual(store.checkpointNeed, .none)
        #expect(store.walBytes < Self.limit / 16)
        job.close()
        expectEqual(uv_loop_close(&loop), 0)
        let state = try reopen(directory, closing: store)
        #expect(state.revision == rev && state.objects["after"] == ["n": 1])
    }

    /// What the server sees of all this (`Store.afterCommit(on:)`): the background checkpoint queued on the
    /// loop's thread pool once the WAL needs one, and the blocking fallback reported as a warning, once a
    /// second at most (the rest counted into the next report).
    @Test func afterCommitQueuesTheBackgroundCheckpointAndReportsTheBlockingFallbackOnceASecond() throws {
        let directory = TemporaryDirectory()
        let store = try open(directory)
        // The pause and the report window are on the store's clock: turned here, not waited for.
        store.clock = .manual()
        try store.startBackgroundCheckpoints(delayMilliseconds: 0)
        var loop = uv_loop_t()
        expectEqual(uv_loop_init(&loop), 0)
        var rev = try commit(store, from: 1) { $0.checkpointNeed == .background }
        expectEqual(store.afterCommit(on: &loop), nil)
        expectEqual(uv_run(&loop, UV_RUN_DEFAULT), 0)
        let job = try #require(store.backgroundCheckpoint)
        #expect(job.completed == 1 && job.lastCheckpointSucceeded)
        try store.commit(F.batch([F.entry(rev, "after", ["n": 1])]))
        rev += 1
        expectEqual(store.checkpointNeed, .none, "the checkpoint copied the whole WAL: it starts again")
        // No more background checkpoints (afterCommit not called): the WAL runs into its limit, twice.
        rev = try commit(store, from: rev) { $0.blockingCheckpoint != nil }
        let notice = try #require(store.afterCommit(on: &loop))
        expectEqual(notice.level, .warning)
        #expect(notice.message.contains("the WAL passed --wal-limit") && notice.message.contains(": a blocking checkpoint on the event loop"),
                "\(notice.message)")
        rev = try commit(store, from: rev) { $0.blockingCheckpoint != nil }
        expectEqual(store.afterCommit(on: &loop), nil, "within the same second: counted, not reported")
        store.clock.advance(nanoseconds: 999_000_000)
        rev = try commit(store, from: rev) { $0.blockingCheckpoint != nil }
        expectEqual(store.afterCommit(on: &loop), nil, "999 ms after the report: still counted")
        store.clock.advance(nanoseconds: 1_000_000)
        _ = try commit(store, from: rev) { $0.blockingCheckpoint != nil }
        let next = try #require(store.afterCommit(on: &loop))
        #expect(next.message.contains(": 3 blocking checkpoints on the event loop"), "\(next.message)")
        expectEqual(uv_run(&loop, UV_RUN_DEFAULT), 0)
        store.close()
        expectEqual(uv_loop_close(&loop), 0)
    }

    /// Holds the WAL's checkpoint lock as a checkpoint on another connection does while it copies and
    /// syncs: an open-file-description lock (which conflicts with SQLite's POSIX locks even in this process)
    /// on byte 121 of the `-shm` file (SQLite's `UNIX_SHM_BASE` 120 + `WAL_CKPT_LOCK` 1). Returns the
    /// descriptor; closing it lets go.
    private func holdCheckpointLock(_ store: SQLiteStore) throws -> Int32 {
        let descriptor = Glibc.open(store.databasePath + "-shm", O_RDWR)
        try #require(descriptor >= 0)
        var lock = flock()
        lock.l_type = Int16(F_WRLCK)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = 121
        lock.l_len = 1
        try #require(fcntl(descriptor, 37 /* F_OFD_SETLK */, &lock) == 0, "errno \(errno)")
        return descriptor
    }

    @Test func theBlockingCheckpointWaitsForACheckpointRunningOnAnotherConnectionThenEmptiesTheWAL() throws {
        let directory = TemporaryDirectory()
        let store = try open(directory)
        let rev = try commit(store, from: 1) { $0.checkpointNeed == .background }
        let lock = try holdCheckpointLock(store)
        // The other checkpoint finishes a little later, on another thread. (Time: nothing shows that the
        // blocking checkpoint is already waiting for the lock.)
        let released = Thread { usleep(200_000); close(lock) }
        released.start()
        #expect(store.checkpointBlocking(), "waited for the checkpoint lock instead of failing at once")
        #expect(store.walBytes == 0 && walFileBytes(store) == 0)
        let state = try reopen(directory, closing: store)
        expectEqual(state.revision, rev - 1)
    }

    @Test func theBlockingCheckpointGivesUpWhenTheCheckpointLockStaysTakenAndTheNextOneEmptiesTheWAL() throws {
        let directory = TemporaryDirectory()
        let store = try open(directory)
        _ = try commit(store, from: 1) { $0.checkpointNeed == .background }
        let frames = store.walBytes
        store.blockingCheckpointWaitMilliseconds = 50
        let lock = try holdCheckpointLock(store)
        #expect(!store.checkpointBlocking())
        expectEqual(store.walBytes, frames)
        close(lock)
        #expect(store.checkpointBlocking())
        #expect(store.walBytes == 0 && walFileBytes(store) == 0)
        store.close()
    }

    /// Another process's read transaction (`kvod backup`'s copy) holds the WAL's frames: the blocking fallback
    /// waits for it 100 ms, not 10 s, then commits go a second without trying (the WAL grows meanwhile), and
    /// the first try after the reader ends empties the WAL. Nothing is lost.
    @Test func readersHoldTheBlockingCheckpointBackBrieflyAndTheWALGrowsUntilTheyEnd() throws {
        let directory = TemporaryDirectory()
        let store = try open(directory)
        // The pause and the report window are on the store's clock: turned here, not waited for.
        store.clock = .manual()
        var rev = try commit(store, from: 1) { $0.checkpointNeed == .background }
        let reader = try SQLiteDatabase(path: store.databasePath, create: false)
        try reader.exec("BEGIN")
        let read = try reader.prepare("SELECT count(*) FROM objects")
        #expect(try read.step())
        let started = Date()
        #expect(!store.checkpointBlocking(), "the reader holds the frames")
        let waited = Date().timeIntervalSince(started)
        #expect(waited < 5, "waited \(waited) s for a reader")
        #expect(store.blockingCheckpointHeldByReaders)
        // Commits past the limit go on without waiting: the WAL grows beyond it while the reader reads.
        let paused = Date()
        rev = try commit(store, from: rev) { $0.walBytes > Self.limit + Self.limit / 2 }
        #expect(store.blockingCheckpoint?.emptied == false && store.blockingCheckpointHeldByReaders)
        #expect(Date().timeIntervalSince(paused) < 30)
        var loop = uv_loop_t()
        expectEqual(uv_loop_init(&loop), 0)
        let notice = try #require(store.afterCommit(on: &loop))
        #expect(notice.level == .warning && notice.message.contains("while another process reads the database"), "\(notice.message)")
        read.finalize()
        try reader.exec("COMMIT")
        reader.close()
        store.clock.advance(nanoseconds: SQLiteStore.blockingCheckpointReaderBackoffNanoseconds)
        try store.commit(F.batch([F.entry(rev, "after", ["n": 1])]))
        expectEqual(store.blockingCheckpoint?.emptied, true, "the reader gone, the next try empties the WAL")
        expectEqual(store.walBytes, 0)
        expectEqual(uv_run(&loop, UV_RUN_DEFAULT), 0)
        expectEqual(uv_loop_close(&loop), 0)
        let state = try reopen(directory, closing: store)
        expectEqual(state.revision, rev)
    }

    private func reopen(_ directory: TemporaryDirectory, closing store: SQLiteStore) throws -> PersistedState {
        store.close()
        let reopened = try open(directory)
        defer { reopened.close() }
        return try reopened.load()
    }
}
