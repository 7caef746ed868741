import CLibUV
import CSodium
import KVOJSON
import KVOModel
import KVOEngine

/// One new password hash for an online `userAdd` or `userPasswd`, made on the libuv thread pool
/// (Argon2id is slow by design), then handed back on the loop thread to `finished`.
///
/// Created and finished on the loop thread; `run()` alone runs on the pool, between the two (libuv
/// orders them). Admin connections wait for their hash (their reading is paused meanwhile), so at most
/// one job per admin connection exists.
final class PasswordHashJob: @unchecked Sendable {
    let requestID: JSONValue?
    let connection: ConnectionID
    private var password: [UInt8]
    private let cost: PasswordHasher.Cost
    /// Set by `run()`: the hash, or why there is none.
    private(set) var result: Result<String, PasswordHasher.HashError> = .failure(.emptyPassword)
    private let finished: (PasswordHashJob) -> Void

    init(requestID: JSONValue?, connection: ConnectionID, password: String,
         cost: PasswordHasher.Cost, finished: @escaping (PasswordHashJob) -> Void) {
        self.requestID = requestID
        self.connection = connection
        self.password = Array(password.utf8)
        self.cost = cost
        self.finished = finished
    }

    /// Queues the job on `loop`'s thread pool.
    func start(on loop: UnsafeMutablePointer<uv_loop_t>) {
        let work = UnsafeMutablePointer<uv_work_t>.allocate(capacity: 1)
        work.initialize(to: uv_work_t())
        work.pointee.data = Unmanaged.passRetained(self).toOpaque()
        if uv_queue_work(loop, work, PasswordHashJob.workCallback, PasswordHashJob.afterWorkCallback) != 0 {
            Unmanaged<PasswordHashJob>.fromOpaque(work.pointee.data).release()
            work.deallocate()
            result = .failure(.outOfMemory)
            finished(self)
        }
    }

    /// Thread pool: the slow part.
    private func run() {
        let text = String(decoding: password, as: UTF8.self)
        do { result = .success(try PasswordHasher.hash(text, cost: cost)) } catch { result = .failure(error) }
        password.withUnsafeMutableBytes { sodium_memzero($0.baseAddress, $0.count) }
        password = []
    }

    private static let workCallback: uv_work_cb = { work in
        Unmanaged<PasswordHashJob>.fromOpaque(work!.pointee.data).takeUnretainedValue().run()
    }

    private static let afterWorkCallback: uv_after_work_cb = { work, _ in
        let job = Unmanaged<PasswordHashJob>.fromOpaque(work!.pointee.data).takeRetainedValue()
        work!.deallocate()
        job.finished(job)
    }
}

