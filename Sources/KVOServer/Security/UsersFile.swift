#if canImport(Glibc)
import Glibc
import KVOEngine
import KVOModel
#endif

/// The users file of `--users FILE` (with `--in-memory`): read at start-up, written by the
/// `kvod user … --users FILE` commands and by the online admin operations. Format: docs/protocol.md,
/// "Users file". Written whole to a temporary file beside it (mode 0600: it holds password hashes),
/// synced and renamed over the old one, so a crash leaves the old file or the new, never half of one.
///
/// Stateless; blocking file I/O: start-up, the `kvod user` commands, or (rare) admin changes.
package enum UsersFile {
    /// The users in `path`; a missing file is an error unless `missingIsEmpty`.
    package static func load(_ path: String, missingIsEmpty: Bool = false) throws(UserDirectoryError) -> UserDirectory {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            let code = errno
            if code == ENOENT && missingIsEmpty { return UserDirectory() }
            throw UserDirectoryError("cannot read users file '\(path)': \(String(cString: strerror(code)))")
        }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = read(descriptor, &chunk, chunk.count)
            if count < 0 {
                if errno == EINTR { continue }
                throw UserDirectoryError("cannot read users file '\(path)': \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            bytes.append(contentsOf: chunk[0..<count])
            if bytes.count > maximumFileBytes {
                throw UserDirectoryError("users file '\(path)' is larger than \(maximumFileBytes) bytes")
            }
        }
        do {
            return try UserDirectory(fileText: bytes)
        } catch {
            throw UserDirectoryError("users file '\(path)': \(error.message)")
        }
    }

    /// Largest users file read (64 MiB: hundreds of thousands of users).
    package static let maximumFileBytes = 64 << 20

    /// Writes `directory` to `path` atomically (temporary file, fsync, rename), mode 0600.
    package static func save(_ directory: UserDirectory, to path: String) throws(UserDirectoryError) {
        let temporary = path + ".tmp"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw UserDirectoryError("cannot write users file '\(temporary)': \(String(cString: strerror(errno)))")
        }
        // A leftover temporary file keeps its mode through O_TRUNC: make it private all the same.
        _ = fchmod(descriptor, 0o600)
        let bytes = Array(directory.fileText.utf8)
        var written = 0
        while written < bytes.count {
            let count = bytes[written...].withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                let message = String(cString: strerror(errno))
                close(descriptor)
                unlink(temporary)
                throw UserDirectoryError("cannot write users file '\(temporary)': \(message)")
            }
            written += count
        }
        let synced = fsync(descriptor) == 0
        close(descriptor)
        guard synced, rename(temporary, path) == 0 else {
            let message = String(cString: strerror(errno))
            unlink(temporary)
            throw UserDirectoryError("cannot write users file '\(path)': \(message)")
        }
    }
}
