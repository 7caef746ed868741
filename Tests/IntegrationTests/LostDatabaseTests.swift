import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Issue 27: a data directory that held a database whose file is now missing or empty (a failed restore, a
/// copy cut short, a deleted file) refuses the start, naming the file and what shows that a database
/// lived there, instead of starting as a healthy, empty server; `--init` starts empty on purpose. A new
/// directory still just works. The real kvod and `kvod user`.
@Suite("lost database file")
struct LostDatabaseTests {
    /// A data directory written by a real kvod (one object), stopped: its database, marker and lock file.
    private static func usedDirectory(_ scratch: TemporaryDirectory) throws -> (data: String, database: String) {
        let data = scratch.appending("data")
        let server = try KVODProcess(dataDirectory: data)
        try server.connect().call("create", ["object": "kept", "values": ["v": 1]])
        expectEqual(server.stop(), 0)
        return (data, data + "/kvod.sqlite3")
    }

    /// kvod's log when it refuses to start on `data` with `arguments`.
    private static func refusal(_ arguments: [String] = [], data: String) -> String {
        let error = #expect(throws: KVODProcessError.self) { _ = try KVODProcess(arguments, dataDirectory: data) }
        guard case let .exitedEarly(status, log) = error else { return "" }
        expectEqual(status, 1, "\(log)")
        return log
    }

    @Test("a new data directory gets a database and the marker kvod.id; an existing database without one gets it")
    func newDirectoryIsMarked() throws {
        let scratch = try TemporaryDirectory("lost-new")
        let store = try Self.usedDirectory(scratch)
        let marker = try String(contentsOfFile: store.data + "/kvod.id", encoding: .utf8)
        #expect(marker.hasPrefix("kvod data directory\nid: "), "\(marker)")
        #expect(marker.contains("created: 20"), "\(marker)")
        // A directory of a kvod older than the marker: marked at its next start, the data untouched.
        try FileManager.default.removeItem(atPath: store.data + "/kvod.id")
        let again = try KVODProcess(dataDirectory: store.data)
        expectEqual(try again.connect().call("list")["objects"], ["kept"])
        expectEqual(again.stop(), 0)
        #expect(FileManager.default.fileExists(atPath: store.data + "/kvod.id"))
    }

    @Test("a deleted database is refused naming the file and the traces; --init starts empty, saying so, and marks it anew")
    func deletedDatabaseIsRefused() throws {
        let scratch = try TemporaryDirectory("lost-deleted")
        let store = try Self.usedDirectory(scratch)
        let firstID = try String(contentsOfFile: store.data + "/kvod.id", encoding: .utf8)
        try FileManager.default.removeItem(atPath: store.database)
        let log = Self.refusal(data: store.data)
        #expect(log.contains("""
            cannot start: storage: cannot use the database '\(store.database)': it is missing, but this data directory \
            held one (kvod.id is there): was it deleted, or did a restore fail? Restore it from a \
            backup, or pass --init to start with an empty store
            """), "\(log)")
        #expect(!FileManager.default.fileExists(atPath: store.database), "the refusal created no database")

        let fresh = try KVODProcess(["--init"], dataDirectory: store.data)
        expectEqual(try fresh.connect().call("list")["objects"], [])
        #expect(fresh.waitForLog("--init: '\(store.database)' was missing in a data directory that held a database (kvod.id): starting with a new, empty database"), "\(fresh.log)")
        try fresh.connect().call("create", ["object": "new"])
        expectEqual(fresh.stop(), 0)
        #expect(try String(contentsOfFile: store.data + "/kvod.id", encoding: .utf8) != firstID, "a new database, a new id")
        // From then on an ordinary directory: no --init needed, and --init changes nothing.
        for arguments in [[], ["--init"]] {
            let server = try KVODProcess(arguments, dataDirectory: store.data)
            expectEqual(try server.connect().call("list")["objects"], ["new"])
            expectEqual(server.stop(), 0)
            // The whole log (its last line read): no --init note.
            #expect(server.waitForLog("stopped; event loop closed cleanly"), "\(server.log)")
            #expect(!server.log.contains("--init:"), "\(server.log)")
        }
    }

    @Test("an empty (0-byte) database after a failed restore is refused, as is one beside its leftover write-ahead log")
    func emptyDatabaseIsRefused() throws {
        let scratch = try TemporaryDirectory("lost-empty")
        let store = try Self.usedDirectory(scratch)
        try Data().write(to: URL(fileURLWithPath: store.database))
        let log = Self.refusal(data: store.data)
        #expect(log.contains("cannot use the database '\(store.database)': it is empty (0 bytes), but this data directory held one (kvod.id is there)"), "\(log)")
        // Without the marker (copied without it, or a kvod older than the marker), a leftover WAL shows it.
        try FileManager.default.removeItem(atPath: store.data + "/kvod.id")
        try Data(repeating: 7, count: 100).write(to: URL(fileURLWithPath: store.database + "-wal"))
        let withoutMarker = Self.refusal(data: store.data)
        #expect(withoutMarker.contains("it is empty (0 bytes), but this data directory held one (kvod.sqlite3-wal is there)"), "\(withoutMarker)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: store.database)).isEmpty, "the refusals wrote nothing")
    }

    @Test("--init over a lost database moves its leftover write-ahead log aside (SQLite would apply it to the new one)")
    func initSetsLeftoversAside() throws {
        let scratch = try TemporaryDirectory("lost-wal")
        let store = try Self.usedDirectory(scratch)
        try FileManager.default.removeItem(atPath: store.database)
        try Data(repeating: 7, count: 100).write(to: URL(fileURLWithPath: store.database + "-wal"))
        try Data(repeating: 0, count: 100).write(to: URL(fileURLWithPath: store.database + "-shm"))
        let log = Self.refusal(data: store.data)
        #expect(log.contains("(kvod.id, kvod.sqlite3-wal, kvod.sqlite3-shm are there)"), "\(log)")
        let fresh = try KVODProcess(["--init"], dataDirectory: store.data)
        expectEqual(try fresh.connect().call("list")["objects"], [])
        #expect(fresh.waitForLog("--init: moved the lost database's write-ahead log '\(store.database)-wal' to '\(store.database)-wal.lost'"), "\(fresh.log)")
        expectEqual(fresh.stop(), 0)
        expectEqual(try Data(contentsOf: URL(fileURLWithPath: store.database + "-wal.lost")), Data(repeating: 7, count: 100))
    }

    @Test("kvod user refuses a lost database as kvod does, and takes --init; --init is a usage error without a data directory")
    func userCommandsAndUsage() throws {
        let scratch = try TemporaryDirectory("lost-user")
        let store = try Self.usedDirectory(scratch)
        try FileManager.default.removeItem(atPath: store.database)
        let refused = try KVODUserTool.run(["list", "--data", store.data])
        expectEqual(refused.status, 1)
        #expect(refused.stderr.contains("kvod user: error: cannot use the database '\(store.database)': it is missing, but this data directory held one"), "\(refused.stderr)")
        let initialised = try KVODUserTool.run(["list", "--data", store.data, "--init"])
        expectEqual(initialised.status, 0, "\(initialised.stderr)")
        #expect(initialised.stderr.contains("warning: --init: '\(store.database)' was missing"), "\(initialised.stderr)")
        #expect(FileManager.default.fileExists(atPath: store.database))

        let withUsersFile = try KVODUserTool.run(["list", "--users", scratch.appending("users.json"), "--init"])
        expectEqual(withUsersFile.status, 2)
        #expect(withUsersFile.stderr.contains("--init goes with --data"), "\(withUsersFile.stderr)")
        let error = #expect(throws: KVODProcessError.self) { _ = try KVODProcess(["--init"], storage: .inMemory) }
        if case let .exitedEarly(status, log) = error {
            expectEqual(status, 2)
            #expect(log.contains("kvod: error: --init goes with a data directory, not --in-memory"), "\(log)")
        }
    }
}
