#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
import KVOEngine
import KVOModel
#endif

/// Keeps the store's files private: the database holds the users' Argon2id hashes and token hashes
/// (docs/design.md, "Durability: group commit and history"; README). The data directory is created 0700 when
/// kvod creates it; the database file is created 0600 before SQLite opens it (SQLite gives its `-wal`
/// and `-shm` files the database file's mode), and the lock file 0600. Files kvod owns that exist with
/// group or other permissions lose them (0644 becomes 0600), each one noted for a warning line.
///
/// Stateless; blocking file calls (start-up, `SQLiteStore.init`). Any thread.
enum StoreFileModes {
    /// Mode of the files kvod creates in the data directory.
    static let fileMode: mode_t = 0o600
    /// Mode of a data directory kvod creates.
    static let directoryMode: mode_t = 0o700

    /// Creates the database file at `path` with mode 0600 when it is missing, so that SQLite (which
    /// would create it 0644 less the umask) opens an existing private file. Failures are left to
    /// SQLite's open, which reports them.
    static func createPrivately(_ path: String) {
        let descriptor = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, fileMode)
        if descriptor >= 0 { close(descriptor) }
    }

    /// Takes the group and other permissions off each of `paths` that exists and has some (the owner's
    /// are kept: a read-only database stays read-only); returns a line for each one changed (or that
    /// could not be changed).
    static func tighten(_ paths: [String]) -> [String] {
        var notes: [String] = []
        for path in paths {
            var info = stat()
            guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_mode & 0o077 != 0 else { continue }
            let was = String(info.st_mode & 0o777, radix: 8)
            let tightened = info.st_mode & 0o700
            let now = String(tightened, radix: 8)
            if chmod(path, tightened) == 0 {
                notes.append("'\(path)' was mode 0\(was), open to others (it holds password hashes): now 0\(now)")
            } else {
                notes.append("'\(path)' is mode 0\(was), open to others (it holds password hashes), and cannot be made 0\(now): \(String(cString: strerror(errno)))")
            }
        }
        return notes
    }
}
