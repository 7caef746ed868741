#if canImport(Glibc)
import Glibc
#endif

/// `SQLiteStore`'s files and their file system, for `Store.usage()`: two `stat`s and one `statvfs`, a few
/// microseconds, on the loop thread when `/metrics` is scraped (never on a request's path).
extension SQLiteStore {
    func usage() -> StorageUsage? {
        let directory = databasePath.lastIndex(of: "/").map { String(databasePath[..<$0]) } ?? "."
        var usage = StorageUsage(databaseBytes: SQLiteStore.fileSize(databasePath))
        // No -wal file is no WAL: 0 bytes (the database itself gone: unknown).
        usage.walBytes = SQLiteStore.fileSize(databasePath + "-wal") ?? (usage.databaseBytes == nil ? nil : 0)
        var fileSystem = statvfs()
        if statvfs(directory.isEmpty ? "/" : directory, &fileSystem) == 0 {
            usage.freeBytes = Int(clamping: UInt64(fileSystem.f_bavail) &* UInt64(fileSystem.f_frsize))
            usage.sizeBytes = Int(clamping: UInt64(fileSystem.f_blocks) &* UInt64(fileSystem.f_frsize))
        }
        return usage
    }

    /// `st_size` of `path`, nil when it cannot be read (missing).
    private static func fileSize(_ path: String) -> Int? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return Int(status.st_size)
    }
}
