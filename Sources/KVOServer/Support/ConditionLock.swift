import Glibc
import KVOEngine
import KVOModel

/// A pthread mutex with one condition variable: how the loop thread hands work to one of the cluster's
/// own threads (`NATSBridge`, `SnapshotPublisher`) and tells it to stop, and how that thread waits for it.
/// Any thread; the lock and condition live as long as the object.
final class ConditionLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init() {
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        condition.initialize(to: pthread_cond_t())
        // Timed waits measure CLOCK_MONOTONIC (`WorkerThread.now()`), which a change of the wall clock does not move.
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deinitialize(count: 1)
        condition.deallocate()
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` holding the lock.
    func withLock<R>(_ body: () throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Runs `body` holding the lock, then wakes the thread waiting in `wait(until:_:)`.
    func signal(_ body: () -> Void) {
        withLock {
            body()
            pthread_cond_signal(condition)
        }
    }

    /// Waits (the lock released meanwhile) until `ready` is true or `deadline` (CLOCK_MONOTONIC nanoseconds,
    /// `WorkerThread.now()`) has come: whether `ready` is true.
    func wait(until ready: () -> Bool, deadline: UInt64) -> Bool {
        withLock {
            var time = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
            while !ready() {
                if pthread_cond_timedwait(condition, mutex, &time) == ETIMEDOUT { return ready() }
            }
            return true
        }
    }

    /// Waits (the lock released meanwhile) until `ready` is true, then runs `body` holding the lock.
    func wait<R>(until ready: () -> Bool, _ body: () -> R) -> R {
        withLock {
            while !ready() { pthread_cond_wait(condition, mutex) }
            return body()
        }
    }
}
