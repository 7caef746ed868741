#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The data directory's marker, `kvod.id`: a small text file kvod writes next to `kvod.sqlite3` once the
/// database has its schema (a new database, or one from a kvod older than the marker), saying that this
/// directory holds a kvod database, with an id and the time it was written.
///
/// It exists so that a later start can tell a new, empty directory (where kvod creates a database) from
/// one that held a database which is now missing or empty: a failed restore, a copy cut short, a file
/// deleted by mistake. `LostDatabaseCheck` refuses those unless `--init` says to start empty. A directory
/// emptied whole, marker included (a volume that was not mounted), is new again: nothing is left to tell.
/// kvod never reads the id; it is for operators telling directories (and their backups) apart.
///
/// Stateless; blocking file calls (start-up, `SQLiteStore.init`). Any thread.
enum DataDirectoryMarker {
    /// The marker's name inside the data directory.
    static let fileName = "kvod.id"

    /// `<directory>/kvod.id`.
    static func path(inDirectory directory: String) -> String {
        directory.hasSuffix("/") ? directory + fileName : directory + "/" + fileName
    }

    /// Whether `directory` has a marker (any file by that name).
    static func exists(inDirectory directory: String) -> Bool {
        access(path(inDirectory: directory), F_OK) == 0
    }

    /// The marker's text: what the file is, a random id, the UTC time it was written.
    static func contents(id: String, created: String) -> String {
        """
        kvod data directory
        id: \(id)
        created: \(created)

        kvod wrote this file when it created the database kvod.sqlite3 here. While it is here, kvod refuses to
        start when kvod.sqlite3 is missing or empty (a failed restore, a file deleted by mistake) instead of
        starting with an empty store; `kvod --init` starts empty anyway. Keep it with the database.

        """
    }

    /// Writes the marker: to a temporary file, synced, then renamed into place (a crash leaves either no
    /// marker or a whole one), mode 0600 like the store's other files (`StoreFileModes`). Throws
    /// `.directory` naming the file when it cannot be written.
    static func record(inDirectory directory: String) throws(StorageError) {
        let target = path(inDirectory: directory)
        let temporary = target + ".tmp"
        let text = Array(contents(id: randomID(), created: utcNow()).utf8)
        func failure(_ step: String) -> StorageError {
            .directory(path: directory, reason: "the marker file '\(target)' cannot be written (\(step): \(String(cString: strerror(errno))))")
        }
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, StoreFileModes.fileMode)
        guard descriptor >= 0 else { throw failure("open") }
        let written = text.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard written == text.count, fsync(descriptor) == 0 else {
            let error = failure("write")
            close(descriptor)
            unlink(temporary)
            throw error
        }
        close(descriptor)
        guard rename(temporary, target) == 0 else {
            let error = failure("rename")
            unlink(temporary)
            throw error
        }
        // The rename itself made durable; a failure here leaves a marker that may not survive power loss,
        // which the next start writes again.
        let directoryDescriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryDescriptor >= 0 {
            _ = fsync(directoryDescriptor)
            close(directoryDescriptor)
        }
    }

    /// A random (version 4) UUID, lower-case.
    static func randomID() -> String {
        var generator = SystemRandomNumberGenerator()
        var bytes = (0..<16).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        bytes[6] = bytes[6] & 0x0F | 0x40
        bytes[8] = bytes[8] & 0x3F | 0x80
        let hex = bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }
        return [hex[0..<4], hex[4..<6], hex[6..<8], hex[8..<10], hex[10..<16]].map { $0.joined() }.joined(separator: "-")
    }

    /// The current time, UTC, as `2026-11-27T17:50:00Z`.
    static func utcNow() -> String {
        var now = time(nil)
        var parts = tm()
        gmtime_r(&now, &parts)
        var buffer = [CChar](repeating: 0, count: 32)
        let length = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%SZ", &parts)
        return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
