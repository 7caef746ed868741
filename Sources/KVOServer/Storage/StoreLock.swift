#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
import KVOEngine
import KVOModel
#endif

/// The data directory's lock: an exclusive `flock` on `<database>.lock`, held from `SQLiteStore.init`
/// to `close()`, so that a second kvod (or a second store in this process: `flock` locks belong to the
/// open file, not the process) on the same directory fails at start-up with `StorageError.locked`.
///
/// A lock file of its own, not SQLite's `locking_mode=EXCLUSIVE` (which would leave no room for the
/// background checkpoint's second connection: `WALCheckpointJob`), and not a lock on the database file
/// (closing any descriptor of that file would drop SQLite's own POSIX locks). Loop thread (its owner's).
final class StoreLock {
    /// The lock file's path.
    var path: String { lock.path }
    private let lock: AdvisoryFileLock

    /// How long `init` keeps trying while another holder has the lock, in milliseconds.
    ///
    /// A lock just released can still be held for a moment: by a kvod that is exiting, or by a child
    /// that another thread of this process is starting (between its `fork` and its `exec` the child
    /// shares the lock file's open file, and with it the `flock`, though `O_CLOEXEC` closes it at the
    /// `exec`). A second kvod on the same directory is refused after this wait.
    static let contendedWaitMilliseconds = 1_000

    /// Takes the lock, creating the file when missing; nil when another holder keeps it for
    /// `contendedWaitMilliseconds`. Throws the `errno` text when the file cannot be opened or locked for
    /// another reason. Blocks the calling thread while it waits (start-up only).
    init?(path: String) throws(StorageError) {
        do {
            guard let lock = try AdvisoryFileLock(path: path, exclusive: true,
                                                  waitMilliseconds: StoreLock.contendedWaitMilliseconds) else { return nil }
            self.lock = lock
        } catch let failure {
            let verb = if case .cannotOpen = failure { "opened" } else { "locked" }
            let directory = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
            throw .directory(path: directory.isEmpty ? (path.hasPrefix("/") ? "/" : ".") : directory,
                             reason: "the lock file '\(path)' cannot be \(verb) (\(failure.reason))")
        }
    }

    /// Releases the lock (closing the file). Idempotent.
    func release() { lock.release() }
}
