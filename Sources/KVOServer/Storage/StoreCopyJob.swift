import CLibUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The copy a `backup` request streams (`Server+Backup`): `StoreBackup.copyChecked` of the store's database into the
/// partial file, run on the loop's thread pool (`uv_queue_work`), so that the loop serves on while SQLite copies (one
/// read transaction on a connection of its own: the database as one commit left it, as `kvod backup` copies it).
///
/// Threads: made, started and finished on the loop thread; `run()` on a pool thread between `start` and the
/// after-work callback (libuv orders them), touching only `source`, `partial` and `result`. `abandon()` (loop thread:
/// the client went away) makes the after-work callback remove the copy instead of handing it on. `@unchecked Sendable`
/// for that hand-over alone.
final class StoreCopyJob: @unchecked Sendable {
    let source: String
    let partial: String
    /// Set by `run()`, read on the loop thread after it.
    private(set) var result: Result<StoreBackup.Summary, BackupError>?
    /// Loop thread: nobody waits for the copy any more.
    private(set) var isAbandoned = false
    private var finished: ((StoreCopyJob) -> Void)?

    init(source: String, partial: String) {
        self.source = source
        self.partial = partial
    }

    /// Queues the copy; `finished` runs on the loop thread when it is done (not when abandoned: the copy is then
    /// removed). False when libuv refused the work.
    func start(on loop: UnsafeMutablePointer<uv_loop_t>, finished: @escaping (StoreCopyJob) -> Void) -> Bool {
        let work = UnsafeMutablePointer<uv_work_t>.allocate(capacity: 1)
        work.initialize(to: uv_work_t())
        work.pointee.data = Unmanaged.passRetained(self).toOpaque()
        self.finished = finished
        guard uv_queue_work(loop, work, StoreCopyJob.workCallback, StoreCopyJob.afterWorkCallback) == 0 else {
            Unmanaged<StoreCopyJob>.fromOpaque(work.pointee.data).release()
            work.deallocate()
            self.finished = nil
            return false
        }
        return true
    }

    /// Loop thread: the copy is removed when it is done, and `finished` is not called.
    func abandon() {
        isAbandoned = true
        finished = nil
    }

    /// Thread pool.
    private func run() {
        do throws(BackupError) {
            result = .success(try StoreBackup.copyChecked(source, into: partial))
        } catch {
            result = .failure(error)
        }
    }

    private static let workCallback: uv_work_cb = { work in
        Unmanaged<StoreCopyJob>.fromOpaque(work!.pointee.data).takeUnretainedValue().run()
    }

    private static let afterWorkCallback: uv_after_work_cb = { work, _ in
        let job = Unmanaged<StoreCopyJob>.fromOpaque(work!.pointee.data).takeRetainedValue()
        work!.deallocate()
        if job.isAbandoned {
            unlink(job.partial)
            return
        }
        let finished = job.finished
        job.finished = nil
        finished?(job)
    }
}
