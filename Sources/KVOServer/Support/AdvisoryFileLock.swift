#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
import KVOEngine
import KVOModel
#endif

/// An advisory `flock` on a lock file of its own (created mode 0600 when missing), shared or exclusive,
/// taken with a bounded wait: the primitive under `StoreLock` (the data directory) and `UsersFileLock`
/// (a users file). `flock` locks belong to the open file, so two holders in one process exclude each
/// other as two processes do; the descriptor is `O_CLOEXEC`.
///
/// Owned by its taker; released by `release()`, deinit, or the process's exit. Blocks the calling
/// thread while it waits (start-up and commands only).
final class AdvisoryFileLock {
    /// Why the lock could not be taken (other than being held): the `errno` of `open` or `flock`.
    enum Failure: Error {
        case cannotOpen(errno: Int32)
        case cannotLock(errno: Int32)

        /// The `errno` text.
        var reason: String {
            switch self {
            case let .cannotOpen(code), let .cannotLock(code): String(cString: strerror(code))
            }
        }
    }

    /// The lock file's path.
    let path: String
    private var descriptor: Int32

    /// Takes the lock on `path`; nil when another holder keeps it (the other way, or at all for an
    /// exclusive lock) for `waitMilliseconds`. A lock just released can still be held for a moment: by a
    /// process that is exiting, or by a child another thread is starting (between `fork` and `exec` it
    /// shares the open file, and with it the `flock`).
    init?(path: String, exclusive: Bool, waitMilliseconds: Int) throws(Failure) {
        self.path = path
        descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw .cannotOpen(errno: errno) }
        var waited = 0
        while flock(descriptor, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0 {
            let failure = errno
            if failure == EINTR { continue }
            if failure == EWOULDBLOCK, waited < waitMilliseconds {
                usleep(10_000)
                waited += 10
                continue
            }
            close(descriptor)
            descriptor = -1
            if failure == EWOULDBLOCK { return nil }
            throw .cannotLock(errno: failure)
        }
    }

    deinit { release() }

    /// Releases the lock (closing the file). Idempotent.
    func release() {
        guard descriptor >= 0 else { return }
        close(descriptor)
        descriptor = -1
    }
}
