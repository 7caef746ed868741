#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The data directory's lock: an exclusive `flock` on `<database>.lock`, held from `PersistentStore.init`
/// to `close()`, so that a second kvod (or a second store in this process: `flock` locks belong to the
/// open file, not the process) on the same directory fails at start-up with `StorageError.locked`.
///
/// A lock file of its own, not SQLite's `locking_mode=EXCLUSIVE` (which would leave no room for the
/// background checkpoint's second connection: `WALCheckpointJob`), and not a lock on the database file
/// (closing any descriptor of that file would drop SQLite's own POSIX locks). Loop thread (its owner's).
final class StoreLock {
    /// The lock file's path.
    let path: String
    private var descriptor: Int32

    /// Takes the lock, creating the file when missing; nil when another holder has it. Throws the
    /// `errno` text when the file cannot be opened or locked for another reason.
    init?(path: String) throws(StorageError) {
        self.path = path
        descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw .directory(path: path, reason: "the lock file cannot be opened (\(String(cString: strerror(errno))))")
        }
        if flock(descriptor, LOCK_EX | LOCK_NB) != 0 {
            let failure = errno
            close(descriptor)
            descriptor = -1
            if failure == EWOULDBLOCK { return nil }
            throw .directory(path: path, reason: "the lock file cannot be locked (\(String(cString: strerror(failure))))")
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
