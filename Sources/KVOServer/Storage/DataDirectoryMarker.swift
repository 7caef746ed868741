#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The data directory's marker, `kvod.id`: a small text file kvod writes next to `kvod.sqlite3` once the
/// database has its schema (a new database, or one from a kvod older than the marker), saying that this
/// directory holds a kvod database, with an id and the time it was written, and which files kvod last had open.
///
/// It exists so that a later start can tell a new, empty directory (where kvod creates a database) from
/// one that held a database which is now missing or empty: a failed restore, a copy cut short, a file
/// deleted by mistake. `LostDatabaseCheck` refuses those unless `--init` says to start empty. A directory
/// emptied whole, marker included (a volume that was not mounted), is new again: nothing is left to tell.
/// kvod never reads the id; it is for operators telling directories (and their backups) apart.
///
/// It also names the database file and the write-ahead log the store last had open (`Files`, device and
/// inode; rewritten when they change: at each start, at a clean stop, by `kvod restore`), so that a start can
/// tell a `-wal` written for another file from the database's own (`ForeignLogCheck`, issue 42). A marker
/// of a kvod older than those lines reads as recording no files.
///
/// Stateless; blocking file calls (start-up, `SQLiteStore.init` and `close()`, `kvod restore`). Any thread.
enum DataDirectoryMarker {
    /// The marker's name inside the data directory.
    static let fileName = "kvod.id"

    /// The files the store last had open: the database file, and its `-wal` (nil: none, as after a clean stop,
    /// where SQLite copied the log into the database and removed it).
    struct Files: Equatable {
        let database: FileIdentity
        let log: FileIdentity?
    }

    /// What a marker says; a line it lacks (an older kvod's marker, a file edited by hand) is nil.
    struct Contents: Equatable {
        var id: String?
        var created: String?
        var files: Files?
    }

    /// `<directory>/kvod.id`.
    static func path(inDirectory directory: String) -> String {
        directory.hasSuffix("/") ? directory + fileName : directory + "/" + fileName
    }

    /// Whether `directory` has a marker (any file by that name).
    static func exists(inDirectory directory: String) -> Bool {
        access(path(inDirectory: directory), F_OK) == 0
    }

    /// The marker's text: what the file is, a random id, the UTC time it was first written, the files, and why.
    static func contents(id: String, created: String, files: Files? = nil) -> String {
        var lines = "kvod data directory\nid: \(id)\ncreated: \(created)\n"
        if let files {
            lines += "database file: \(files.database.text)\nwrite-ahead log: \(files.log?.text ?? "none")\n"
        }
        return lines + """

            kvod wrote this file when it created the database kvod.sqlite3 here. While it is here, kvod refuses to
            start when kvod.sqlite3 is missing or empty (a failed restore, a file deleted by mistake) instead of
            starting with an empty store; `kvod --init` starts empty anyway. The lines above name the database file
            and the write-ahead log kvod last had open: a start that finds that log beside another database file
            sets the log aside instead of applying it to a database it was not written for. Keep it with the database.

            """
    }

    /// The marker of `directory`, read and parsed; nil when there is none or it cannot be read.
    static func load(inDirectory directory: String) -> Contents? {
        let descriptor = open(path(inDirectory: directory), O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 1 << 16 {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            bytes += buffer.prefix(count)
        }
        return parse(String(decoding: bytes, as: UTF8.self))
    }

    /// The lines of `text` before its first empty one, as `key: value`.
    static func parse(_ text: String) -> Contents {
        var contents = Contents()
        var database: FileIdentity?
        var log: FileIdentity??
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.isEmpty { break }
            guard let colon = line.firstIndex(of: ":") else { continue }
            let key = line[..<colon]
            let value = String(line[line.index(after: colon)...].drop { $0 == " " })
            switch key {
            case "id": contents.id = value
            case "created": contents.created = value
            case "database file": database = FileIdentity(text: value)
            case "write-ahead log":
                if value == "none" {
                    log = .some(nil)
                } else if let file = FileIdentity(text: value) {
                    log = .some(file)
                }
            default: break
            }
        }
        if let database, let log { contents.files = Files(database: database, log: log) }
        return contents
    }

    /// Writes the marker: to a temporary file, synced, then renamed into place (a crash leaves either the
    /// previous marker or a whole new one), mode 0600 like the store's other files (`StoreFileModes`). With
    /// `files`, the files the store has open; the id and time of `previous` (the marker there) are kept, a new
    /// id is made without it (a new database). Throws `.directory` naming the file when it cannot be written.
    static func record(inDirectory directory: String, files: Files? = nil, keeping previous: Contents? = nil) throws(StorageError) {
        let target = path(inDirectory: directory)
        let temporary = target + ".tmp"
        let text = Array(contents(id: previous?.id ?? randomID(), created: previous?.created ?? utcNow(), files: files).utf8)
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
