#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value guarded by a pthread mutex: the client's shared state (pending requests, observation
/// buffers, the outgoing buffer) lives in these and is touched only inside `withLock`.
///
/// `Synchronization.Mutex` would do, but needs macOS 15 and the package supports macOS 13.
/// `@unchecked Sendable` is sound because `state` is only ever read or written inside `withLock`,
/// which holds the mutex for the whole access (and the mutex is heap-allocated, so it never moves).
/// Any thread may call `withLock`; the closure must not call back into the same lock.
final class Locked<State>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var state: State

    init(_ state: State) {
        self.state = state
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the state.
    @inline(__always)
    func withLock<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&state)
    }
}
