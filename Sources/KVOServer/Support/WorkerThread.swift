import Glibc
import KVOEngine
import KVOModel

/// A joinable pthread running one closure: the cluster's threads of their own (`NATSBridge`,
/// `SnapshotPublisher`), started and joined by the loop thread.
struct WorkerThread {
    private var thread = pthread_t()
    private(set) var isRunning = false
    /// Told when the closure has returned, for `join(until:)`.
    private let end = End()

    /// Starts `body` on a new thread; `what` names it in the message if the system refuses one (fatal:
    /// kvod cannot run its cluster without it).
    mutating func start(_ what: String, _ body: @escaping () -> Void) {
        final class Box { let body: () -> Void; init(_ body: @escaping () -> Void) { self.body = body } }
        let end = self.end
        let retained = Unmanaged.passRetained(Box {
            body()
            end.mark()
        }).toOpaque()
        let status = pthread_create(&thread, nil, { argument in
            Unmanaged<Box>.fromOpaque(argument!).takeRetainedValue().body()
            return nil
        }, retained)
        guard status == 0 else { fatalError("kvod: cannot start \(what) (pthread_create: \(status))") }
        isRunning = true
    }

    /// Waits for the thread to end, if it was started.
    mutating func join() {
        guard isRunning else { return }
        pthread_join(thread, nil)
        isRunning = false
    }

    /// Waits for the thread to end until `deadline` (`WorkerThread.now()` nanoseconds) at the latest: true when
    /// it ended (it is joined), false when it had not (it is detached and left to end on its own, keeping alive
    /// what its closure holds). True when it was never started.
    mutating func join(until deadline: UInt64) -> Bool {
        guard isRunning else { return true }
        isRunning = false
        guard end.wait(until: deadline) else {
            pthread_detach(thread)
            return false
        }
        pthread_join(thread, nil)
        return true
    }

    /// Now, in nanoseconds of CLOCK_MONOTONIC (the clock of libuv's `uv_hrtime` on Linux), for `join(until:)`.
    static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    /// Whether the thread's closure has returned.
    private final class End: @unchecked Sendable {
        private let lock = ConditionLock()
        /// Under `lock`.
        private var ended = false

        func mark() {
            lock.signal { ended = true }
        }

        func wait(until deadline: UInt64) -> Bool {
            lock.wait(until: { ended }, deadline: deadline)
        }
    }
}
