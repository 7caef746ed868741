#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Space held back on the data directory's file system for the moment it fills: a file of `bytes`
/// allocated bytes (`<data>/kvod.reserve`, `--disk-reserve`), given back when a commit fails for lack of
/// space so that the same commit can be tried once more and succeed. The writes of that loop iteration
/// are then stored and acknowledged, and the server refuses the next ones (`StorageHealth.full`) instead of
/// rolling the iteration back. It is made again (`make()`) before writes are taken again: a server that
/// takes writes always has its reserve (CockroachDB keeps an emergency ballast file for the same reason).
///
/// The file is allocated with `posix_fallocate`, so it really holds its blocks (a sparse file would free
/// nothing). Owned by the `SQLiteStore`; loop thread. Not Sendable.
final class DiskReserve {
    /// `<data>/kvod.reserve`.
    let path: String
    /// The size it is made with.
    let bytes: Int
    /// Whether the file holds `bytes` now (made, not yet released).
    private(set) var isHeld = false

    /// The reserve's file name in the data directory.
    static let fileName = "kvod.reserve"

    /// The default `bytes` for a file system of `size` bytes: 64 MiB, but no more than 1/20 of it (a
    /// small volume keeps most of its space for data).
    static func defaultBytes(fileSystemSize size: Int) -> Int {
        min(64 << 20, max(0, size / 20))
    }

    init(directory: String, bytes: Int) {
        path = directory + "/" + DiskReserve.fileName
        self.bytes = bytes
    }

    /// Allocates the file at its full size (keeping what an earlier run left, when it is that size).
    /// Throws the reason (`strerror`) when the file system has no room for it: the caller then refuses
    /// writes. The file is mode 0600, like the database.
    func make() throws(DiskReserveError) {
        guard !isHeld else { return }
        let descriptor = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw DiskReserveError(path: path, code: errno) }
        defer { close(descriptor) }
        let result = posix_fallocate(descriptor, 0, off_t(bytes))
        guard result == 0 else {
            // Whatever was allocated goes back: a half-made reserve would only hide the shortage.
            _ = ftruncate(descriptor, 0)
            throw DiskReserveError(path: path, code: result)
        }
        isHeld = true
    }

    /// Gives the space back (removes the file). Whether it held any.
    @discardableResult
    func release() -> Bool {
        let held = isHeld
        isHeld = false
        return unlink(path) == 0 && held
    }
}

/// Why `DiskReserve.make()` failed: the file and `strerror` of the error.
struct DiskReserveError: Error, CustomStringConvertible {
    let path: String
    let code: Int32

    /// ENOSPC or EDQUOT: the file system (or the user's quota) has no room.
    var isOutOfSpace: Bool { code == ENOSPC || code == EDQUOT }

    var description: String { "cannot allocate the reserve '\(path)': \(String(cString: strerror(code)))" }
}
