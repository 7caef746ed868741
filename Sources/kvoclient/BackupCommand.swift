import ArgumentParser
import COpenSSL
import KVOClient
import KVOJSON
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `kvoclient backup FILE`: a consistent backup of the server's database, streamed over the protocol
/// (docs/protocol.md, "Backups over the network"): the file `kvod backup` writes, without access to the data
/// directory. Server admins only.
struct BackupCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Write a consistent backup of the server's database to FILE (server admins).",
        discussion: """
            The server copies its database as one commit left it (the copy `kvod backup` makes, checked the same \
            way) and sends it in chunks. The chunks are written to FILE.partial (mode 0600: it holds the users' \
            hashes); once the last one is in, its size and SHA-256 are compared with the server's, and only then is \
            it synced and given the name FILE, which must not exist. Check it with `kvod verify FILE`; restore it \
            with `kvod restore --data DIR FILE` (kvod stopped).
            """)

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: ArgumentHelp("The backup file to write (it must not exist).", valueName: "file"))
    var file: String

    func run() async throws {
        var start = timespec()
        clock_gettime(CLOCK_MONOTONIC, &start)
        guard access(file, F_OK) != 0 else { throw CLIError.backupFile("'\(file)' exists: a backup never replaces a file; name a new one") }
        let partial = file + ".partial"
        var output = try BackupFile(creating: partial)
        do {
            // No heartbeat and no request timeout: the server reads nothing more from the connection while it makes
            // the copy, which may take minutes for a large database.
            let client = try await connection.connect(heartbeat: 0, requestTimeout: nil)
            defer { client.close() }
            let reply = try await { () async throws -> ([String: JSONValue], String) in
                let started = try await ConnectionOptions.call(on: client, "backup")
                guard case let .int(size)? = started["bytes"], size > 0 else { throw CLIError.unexpectedReply("\(JSONValue.object(started))") }
                var offset: Int64 = 0
                while true {
                    let chunk = try await ConnectionOptions.call(on: client, "backup", ["offset": .int(offset)])
                    guard case let .string(text)? = chunk["data"], let bytes = Base64.decode(text), !bytes.isEmpty || offset == size else {
                        throw CLIError.unexpectedReply("a chunk at \(offset) without its data")
                    }
                    try output.append(bytes)
                    offset += Int64(bytes.count)
                    if case let .string(sha256)? = chunk["sha256"] {
                        guard offset == size else { throw CLIError.unexpectedReply("the backup ended at byte \(offset) of \(size)") }
                        let received = output.finishDigest()
                        guard received == sha256 else {
                            throw CLIError.unexpectedReply("the backup's SHA-256 is \(received), the server's \(sha256): it was damaged on the way")
                        }
                        return (started, sha256)
                    }
                    guard offset < size else { throw CLIError.unexpectedReply("the server sent more than the \(size) bytes it announced") }
                }
            }()
            try output.syncAndClose()
            guard link(partial, file) == 0 else {
                let reason = errno == EEXIST ? "it exists now" : String(cString: strerror(errno))
                throw CLIError.backupFile("cannot name the backup '\(file)': \(reason)")
            }
            unlink(partial)
            BackupFile.syncDirectory(of: file)
            var end = timespec()
            clock_gettime(CLOCK_MONOTONIC, &end)
            let milliseconds = Int(end.tv_sec - start.tv_sec) * 1_000 + Int(end.tv_nsec - start.tv_nsec) / 1_000_000
            let summary = reply.0
            func number(_ key: String) -> Int64 { if case let .int(value)? = summary[key] { return value } else { return 0 } }
            let objects = number("objects"), rows = number("historyRows")
            Terminal.printLine("wrote \(file): revision \(number("rev")), \(objects) object\(objects == 1 ? "" : "s"), "
                               + "\(rows) history row\(rows == 1 ? "" : "s"), schema \(number("schema")), \(number("bytes")) bytes, "
                               + "sha256 \(reply.1), in \(milliseconds) ms")
        } catch {
            output.discard()
            throw error
        }
    }
}

/// The file `kvoclient backup` writes its chunks to, with the SHA-256 of what it wrote (OpenSSL's EVP).
/// One task; not Sendable.
struct BackupFile {
    let path: String
    private var descriptor: Int32
    private let digest: OpaquePointer

    /// Creates `path` 0600 (one left by an interrupted backup is replaced: its name says it is partial).
    init(creating path: String) throws {
        self.path = path
        unlink(path)
        descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw CLIError.backupFile("cannot create '\(path)': \(String(cString: strerror(errno)))") }
        guard let context = EVP_MD_CTX_new() else { throw CLIError.backupFile("cannot make a SHA-256 context") }
        digest = context
        EVP_DigestInit_ex(context, EVP_sha256(), nil)
    }

    mutating func append(_ bytes: [UInt8]) throws {
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress! + written, bytes.count - written) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { throw CLIError.backupFile("cannot write '\(path)': \(String(cString: strerror(errno)))") }
            written += count
        }
        bytes.withUnsafeBytes { _ = EVP_DigestUpdate(digest, $0.baseAddress, $0.count) }
    }

    /// The SHA-256 of everything appended, as 64 lowercase hex digits.
    func finishDigest() -> String {
        var hash = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        EVP_DigestFinal_ex(digest, &hash, &length)
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: hash.prefix(Int(length)).flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] }, as: UTF8.self)
    }

    mutating func syncAndClose() throws {
        defer { close(descriptor); descriptor = -1; EVP_MD_CTX_free(digest) }
        guard fsync(descriptor) == 0 else { throw CLIError.backupFile("cannot sync '\(path)': \(String(cString: strerror(errno)))") }
    }

    /// Closes and removes the file: nothing is left under either name.
    mutating func discard() {
        if descriptor >= 0 {
            close(descriptor)
            descriptor = -1
            EVP_MD_CTX_free(digest)
        }
        unlink(path)
    }

    /// Makes the new name durable.
    static func syncDirectory(of path: String) {
        let directory = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
        let descriptor = open(directory.isEmpty ? "/" : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        _ = fsync(descriptor)
        close(descriptor)
    }
}
