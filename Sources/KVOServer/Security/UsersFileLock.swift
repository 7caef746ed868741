#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
import KVOEngine
import KVOModel
#endif

/// The lock of a users file (`--users FILE`): a `flock` on `FILE.lock` (created mode 0600 beside it;
/// not on the file itself, which every write replaces by a rename). A kvod serving the file holds it
/// shared for its whole run (cluster nodes may share one users file); `kvod user … --users FILE` holds
/// it exclusive while it reads and rewrites the file, so that it refuses to change a file a running
/// kvod would later overwrite with its own users (the change would be lost).
///
/// Owned by its taker (the server, on its loop thread; or a `kvod user` command); released by
/// `release()` or deinit, and by the process's exit.
package final class UsersFileLock {
    /// How the lock is held.
    package enum Mode: Sendable {
        /// A kvod serving the file.
        case serving
        /// A `kvod user` command changing it.
        case editing
    }

    /// The lock file's path.
    package var path: String { lock.path }
    private let lock: AdvisoryFileLock

    /// How long `init` keeps trying while the lock is held the other way, in milliseconds (a command
    /// rewriting the file holds it for a moment only).
    static let contendedWaitMilliseconds = 1_000

    /// Takes the lock of `usersFile` in `mode`, creating the lock file when missing; nil when it is held
    /// the other way for `contendedWaitMilliseconds` (`editing`: a kvod serves the file). Throws when the
    /// lock file cannot be opened or locked for another reason. Blocks while it waits.
    package init?(usersFile: String, mode: Mode) throws(UserDirectoryError) {
        let path = usersFile + ".lock"
        do {
            guard let lock = try AdvisoryFileLock(path: path, exclusive: mode == .editing,
                                                  waitMilliseconds: UsersFileLock.contendedWaitMilliseconds)
            else { return nil }
            self.lock = lock
        } catch let failure {
            let verb = if case .cannotOpen = failure { "open" } else { "lock" }
            throw UserDirectoryError("cannot \(verb) the users file's lock '\(path)': \(failure.reason)")
        }
    }

    /// Releases the lock (closing the file). Idempotent.
    package func release() { lock.release() }
}
