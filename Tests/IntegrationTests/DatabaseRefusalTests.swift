import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Issue 27: every start-up refusal of a data directory or database names the path and says in words what is
/// wrong, as one `cannot use the database '…': …` (or `cannot use data directory '…': …`) line: a newer schema,
/// another program's SQLite database, a file kvod's user cannot read, a database path that is a directory, a
/// data directory that is a file, a database another kvod holds, and the same words from `kvod user`. The
/// damaged files are `DamagedDatabaseFileTests`', the damaged rows `CorruptStoreTests`', the lost files
/// `LostDatabaseTests`'. The real kvod.
@Suite("database refusals over TCP")
struct DatabaseRefusalTests {
    /// A data directory written by a real kvod (one object), stopped.
    private static func usedDirectory(_ scratch: TemporaryDirectory) throws -> (data: String, database: String) {
        let data = scratch.appending("data")
        let server = try KVODProcess(dataDirectory: data)
        try server.connect().call("create", ["object": "kept"])
        expectEqual(server.stop(), 0)
        return (data, data + "/kvod.sqlite3")
    }

    /// kvod's log when it refuses to start on `data` (exit status 1).
    private static func refusal(data: String, shellPrefix: String? = nil) -> String {
        let error = #expect(throws: KVODProcessError.self) {
            _ = try KVODProcess(storage: .directory(data), shellPrefix: shellPrefix)
        }
        guard case let .exitedEarly(status, log) = error else { return "" }
        expectEqual(status, 1, "\(log)")
        #expect(!log.contains("Fatal error"), "\(log)")
        return log
    }

    @Test("a database of a newer schema: the file, its version and what this kvod reads")
    func newerSchema() throws {
        let scratch = try TemporaryDirectory("refusal-schema")
        let store = try Self.usedDirectory(scratch)
        try SQLiteFile.execute("UPDATE meta SET value = 99 WHERE key = 'schema_version'", at: store.database)
        let log = Self.refusal(data: store.data)
        #expect(log.contains("""
            cannot start: storage: cannot use the database '\(store.database)': it has schema version 99, written by a \
            newer kvod (this one reads versions 1 to 9): run that kvod or a newer one
            """), "\(log)")
    }

    @Test("another program's SQLite database: the file, and that it is not kvod's")
    func foreignDatabase() throws {
        let scratch = try TemporaryDirectory("refusal-foreign")
        let data = scratch.appending("data")
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: data + "/kvod.sqlite3", contents: Data())
        try SQLiteFile.execute("CREATE TABLE notes(id INTEGER PRIMARY KEY, text TEXT); INSERT INTO notes(text) VALUES('x')",
                               at: data + "/kvod.sqlite3")
        let log = Self.refusal(data: data)
        #expect(log.contains("""
            cannot use the database '\(data)/kvod.sqlite3': it has no 'meta' table: it is damaged or was not written by kvod
            """), "\(log)")
    }

    @Test("a database kvod's user cannot read (restored as root, kvod running as another user): the file, its owner and mode, kvod's uid")
    func unreadableDatabase() throws {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") else {
            print("DatabaseRefusalTests: needs root and setpriv to run kvod as another user; the unreadable database case is not run")
            return
        }
        let scratch = try TemporaryDirectory("refusal-unreadable")
        let store = try Self.usedDirectory(scratch)
        // The directory is kvod's user's (nobody, 65534); the database stays root's, mode 0600.
        expectEqual(chmod(scratch.path, 0o755), 0)
        expectEqual(chown(store.data, 65534, 65534), 0)
        for name in ["kvod.sqlite3.lock", "kvod.id"] { #expect(chown(store.data + "/" + name, 65534, 65534) == 0) }
        let log = Self.refusal(data: store.data, shellPrefix: "exec /usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups -- \"$0\" \"$@\"")
        #expect(log.contains("""
            cannot use the database '\(store.database)': it cannot be read and written by kvod, which runs as uid 65534 \
            gid 65534 (Permission denied): the file is owned by uid 0 gid 0 with mode 0600; give it to kvod's user (chown)
            """), "\(log)")
    }

    @Test("a database path that is a directory, and a data directory that is a file: each named, with what it is")
    func wrongKindsOfFile() throws {
        let scratch = try TemporaryDirectory("refusal-kind")
        let data = scratch.appending("data")
        try FileManager.default.createDirectory(atPath: data + "/kvod.sqlite3", withIntermediateDirectories: true)
        let directoryLog = Self.refusal(data: data)
        #expect(directoryLog.contains("cannot use the database '\(data)/kvod.sqlite3': it is not a regular file (a directory)"), "\(directoryLog)")

        let file = scratch.appending("file")
        FileManager.default.createFile(atPath: file, contents: Data("x".utf8))
        let fileLog = Self.refusal(data: file)
        #expect(fileLog.contains("cannot start: storage: cannot use data directory '\(file)': '\(file)' exists and is not a directory"), "\(fileLog)")
    }

    @Test("a database another kvod holds: the file, and that it is in use")
    func databaseInUse() throws {
        let scratch = try TemporaryDirectory("refusal-locked")
        let data = scratch.appending("data")
        let first = try KVODProcess(dataDirectory: data)
        let log = Self.refusal(data: data)
        #expect(log.contains("cannot use the database '\(data)/kvod.sqlite3': it is in use by another process (is another kvod running with the same --data?)"), "\(log)")
        expectEqual(first.stop(), 0)
    }

    @Test("kvod user words its refusals as kvod does: a newer schema, a damaged file")
    func userCommandNamesTheFile() throws {
        let scratch = try TemporaryDirectory("refusal-user")
        let store = try Self.usedDirectory(scratch)
        try SQLiteFile.execute("UPDATE meta SET value = 99 WHERE key = 'schema_version'", at: store.database)
        let newer = try KVODUserTool.run(["list", "--data", store.data])
        expectEqual(newer.status, 1)
        #expect(newer.stderr.contains("kvod user: error: cannot use the database '\(store.database)': it has schema version 99, written by a newer kvod"), "\(newer.stderr)")
        try Data(repeating: 0x41, count: 8192).write(to: URL(fileURLWithPath: store.database))
        let damaged = try KVODUserTool.run(["list", "--data", store.data])
        expectEqual(damaged.status, 1)
        #expect(damaged.stderr.contains("kvod user: error: cannot use the database '\(store.database)': it is not a SQLite database"), "\(damaged.stderr)")
    }
}
