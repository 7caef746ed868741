#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The lock of a users file (`--users FILE`): a `flock` on `FILE.lock` (created mode 0600 beside it;
/// not on the file itself, which every write replaces by a rename). A kvod serving the file holds it
/// shared for its whole run (cluster nodes may share one users file); `kvod user … --users FILE` holds
/// it exclusive while it reads and rewrites the file, so that it refuses to change a file a running
/// kvod would later overwrite with its own users (the change would be lost).
///
/// Owned by its taker (the server, on its loop thread; or a `kvod user` command); released by
/// `release()` or deinit, and by the process's exit.
public final class UsersFileLock {
    /// How the lock is held.
    public enum Mode: Sendable {
        /// A kvod serving the file.
        case serving
        /// A `kvod user` command changing it.
        case editing
    }

    /// The lock file's path.
    public let path: String
    private var descriptor: Int32

    /// How long `init` keeps trying while the lock is held the other way, in milliseconds (a command
    /// rewriting the file holds it for a moment only).
    static let contendedWaitMilliseconds = 1_000

    /// Takes the lock of `usersFile` in `mode`, creating the lock file when missing; nil when it is held
    /// the other way for `contendedWaitMilliseconds` (`editing`: a kvod serves the file). Throws when the
    /// lock file cannot be opened or locked for another reason. Blocks while it waits.
    public init?(usersFile: String, mode: Mode) throws(UserDirectoryError) {
        path = usersFile + ".lock"
        descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw UserDirectoryError("cannot open the users file's lock '\(path)': \(String(cString: strerror(errno)))")
        }
        let operation = mode == .serving ? LOCK_SH : LOCK_EX
        var waited = 0
        while flock(descriptor, operation | LOCK_NB) != 0 {
            let failure = errno
            if failure == EINTR { continue }
            if failure == EWOULDBLOCK, waited < UsersFileLock.contendedWaitMilliseconds {
                usleep(10_000)
                waited += 10
                continue
            }
            close(descriptor)
            descriptor = -1
            if failure == EWOULDBLOCK { return nil }
            throw UserDirectoryError("cannot lock the users file's lock '\(path)': \(String(cString: strerror(failure)))")
        }
    }

    deinit { release() }

    /// Releases the lock (closing the file). Idempotent.
    public func release() {
        guard descriptor >= 0 else { return }
        close(descriptor)
        descriptor = -1
    }
}
