import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Issue 42, item 8: `kvoclient backup FILE` (the `backup` operation; docs/protocol.md, "Backups over the network")
/// against the real kvod over TCP: the file is the one `kvod backup` writes (restored, the same digest and
/// revision), server admins only, strict fields, one backup at a time, nothing left on the server when a client goes
/// away; `kvod verify` accepts a backup and refuses damaged, truncated and foreign files.
@Suite("backups over the network")
struct NetworkBackupTests {
    private func errorCode(_ reply: JSONValue) -> String? { reply["error"]?["code"]?.stringValue }

    private func kvod(_ arguments: [String]) throws -> KVODUserTool.Result {
        try KVODUserTool.runKVOD(arguments, environment: ProcessInfo.processInfo.environment)
    }

    /// "revision R" in a line of `kvod backup`, `kvoclient backup` or `kvod verify`.
    private func revisionNumber(in line: String) -> Int? {
        guard let range = line.range(of: "revision ") else { return nil }
        return Int(line[range.upperBound...].prefix { $0.isNumber })
    }

    /// A data directory with `alice` (server admin, password "root") and `bob` (read and write only, "bobs").
    private func dataWithUsers(_ scratch: TemporaryDirectory) throws -> String {
        let data = scratch.appending("data")
        try #require(try KVODUserTool.run(["add", "--data", data, "--hash-cost", "minimal", "alice", "*=read,write,admin"],
                                          password: "root").status == 0)
        try #require(try KVODUserTool.run(["add", "--data", data, "--hash-cost", "minimal", "bob", "*=read,write"],
                                          password: "bobs").status == 0)
        return data
    }

    private func login(_ server: KVODProcess, _ user: String, _ password: String) throws -> KVOConnection {
        let connection = try server.connect()
        try connection.call("auth", ["user": .string(user), "password": .string(password)], timeout: 30)
        return connection
    }

    private var partialName: String { "kvod.network-backup.partial" }

    /// Waits (at most 20 s) until `condition` holds.
    private func eventually(_ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(20)
        while !condition(), Date() < deadline { usleep(10_000) }
        return condition()
    }

    @Test("kvoclient backup writes the file kvod backup writes: verified, restored, the same digest and revision")
    func networkBackupEqualsLocal() throws {
        let scratch = try TemporaryDirectory("net-backup")
        let data = try dataWithUsers(scratch)
        let server = try KVODProcess(dataDirectory: data)
        defer { server.stop() }
        let admin = try login(server, "alice", "root")
        for index in 0..<300 {
            try admin.call("create", ["object": .string("o\(index)"), "values": ["n": .int(Int64(index)), "text": .string(String(repeating: "é", count: index))]])
        }
        try admin.call("delete", ["object": "o7"])
        let digest = try admin.call("digest")
        expectEqual(try admin.call("status")["lastBackup"], .null, "no backup yet")
        let file = scratch.appending("net.kvod")
        let result = try KVOClientProcess.run(server, ["--user", "alice", "backup", file], timeout: 60, environment: ["KVOD_PASSWORD": "root"])
        expectEqual(result.status, 0, "\(result.stderr)")
        #expect(result.stdout.hasPrefix("wrote \(file): revision 301, 299 objects, 301 history rows, schema "), "\(result.stdout)")
        #expect(result.stdout.contains(" sha256 "), "\(result.stdout)")
        var info = stat()
        #expect(stat(file, &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(!FileManager.default.fileExists(atPath: file + ".partial"))
        #expect(!FileManager.default.fileExists(atPath: data + "/" + partialName))
        let local = scratch.appending("local.kvod")
        let localResult = try kvod(["backup", "--data", data, local])
        expectEqual(localResult.status, 0, "\(localResult.stderr)")
        expectEqual(revisionNumber(in: localResult.stdout), 301)

        let verified = try kvod(["verify", file])
        expectEqual(verified.status, 0, "\(verified.stderr)")
        #expect(verified.stdout == "\(file) is a whole kvod backup: revision 301, 299 objects, 301 history rows, schema 9, \(info.st_size) bytes\n",
                "\(verified.stdout)")

        // The time and revision of the last backup, in the metrics.
        let metrics = try admin.call("metrics")["text"]?.stringValue ?? ""
        #expect(metrics.contains("kvod_backups_total{result=\"completed\"} 1"), "\(metrics)")
        #expect(metrics.contains("kvod_backup_last_revision 301"), "\(metrics)")
        #expect(metrics.contains("kvod_backup_last_timestamp_seconds "), "\(metrics)")
        // And in status (null before it, above).
        let lastBackup = try admin.call("status")["lastBackup"]
        #expect(lastBackup?["rev"]?.intValue == 301 && lastBackup?["objects"]?.intValue == 299, "\(String(describing: lastBackup))")
        expectEqual(lastBackup?["bytes"]?.intValue, Int64(info.st_size), "\(String(describing: lastBackup))")

        // Restored, each holds what the server held.
        for (name, backup) in [("from-network", file), ("from-local", local)] {
            let restoredData = scratch.appending(name)
            let restore = try kvod(["restore", "--data", restoredData, backup])
            expectEqual(restore.status, 0, "\(restore.stderr)")
            let restored = try KVODProcess(dataDirectory: restoredData)
            let again = try login(restored, "alice", "root")
            let restoredDigest = try again.call("digest")
            expectEqual(restoredDigest["digest"], digest["digest"], "\(name)")
            expectEqual(restoredDigest["rev"], 301, "\(name)")
            expectEqual(restored.stop(), 0)
        }
    }

    @Test("server admins only, strict fields, chunks in order, one backup at a time, and none without a database")
    func refusals() throws {
        let scratch = try TemporaryDirectory("net-backup-refusals")
        let data = try dataWithUsers(scratch)
        let server = try KVODProcess(dataDirectory: data)
        defer { server.stop() }
        let admin = try login(server, "alice", "root")
        try admin.call("create", ["object": "o", "values": ["n": 1]])
        let bob = try login(server, "bob", "bobs")
        expectEqual(errorCode(try bob.request("backup")), "forbidden")
        expectEqual(errorCode(try bob.request("compact")), "forbidden")
        let denied = try KVOClientProcess.run(server, ["--user", "bob", "backup", scratch.appending("b.kvod")], environment: ["KVOD_PASSWORD": "bobs"])
        #expect(denied.status == 1 && denied.stderr.contains("forbidden"), "\(denied.stderr)")
        #expect(!FileManager.default.fileExists(atPath: scratch.appending("b.kvod")))
        #expect(!FileManager.default.fileExists(atPath: scratch.appending("b.kvod.partial")))

        let misspelt = try admin.request("backup", ["ofset": 0])
        expectEqual(errorCode(misspelt), "bad_request")
        expectEqual(misspelt["error"]?["message"]?.stringValue?.contains("did you mean 'offset'"), true, "\(misspelt)")
        expectEqual(errorCode(try admin.request("backup", ["offset": "0"])), "bad_request")
        expectEqual(errorCode(try admin.request("backup", ["offset": -1])), "bad_request")
        expectEqual(errorCode(try admin.request("backup", ["offset": .null])), "bad_request")
        expectEqual(errorCode(try admin.request("compact", ["pages": 10])), "bad_request")
        // A chunk before any backup began.
        expectEqual(errorCode(try admin.request("backup", ["offset": 0])), "bad_request")

        // Two clients at once: the second is refused until the first ends.
        let started = try admin.call("backup", timeout: 60)
        let size = try #require(started["bytes"]?.intValue)
        #expect(started["rev"] == 1 && started["objects"] == 1)
        let other = try login(server, "alice", "root")
        let second = try other.request("backup", timeout: 60)
        expectEqual(errorCode(second), "unavailable", "\(second)")
        // Out of order: refused, and the transfer goes on.
        expectEqual(errorCode(try admin.request("backup", ["offset": 4096])), "bad_request")
        var offset: Int64 = 0
        var sha: JSONValue?
        while sha == nil {
            let chunk = try admin.call("backup", ["offset": .int(offset)])
            expectEqual(chunk["offset"]?.intValue, offset)
            offset += try #require(chunk["bytes"]?.intValue)
            sha = chunk["sha256"]
        }
        expectEqual(offset, size)
        expectEqual(sha?.stringValue?.count, 64)
        #expect(!FileManager.default.fileExists(atPath: data + "/" + partialName))
        // Ended: the other client's turn; the connection still serves.
        expectEqual(try other.call("backup", timeout: 60)["bytes"], .int(size))
        expectEqual(try admin.call("get", ["object": "o", "keyPath": "n"])["value"], 1)

        // A file name the file system refuses, and an existing file: usage errors, nothing written.
        let longName = scratch.appending(String(repeating: "x", count: 5000))
        let tooLong = try KVOClientProcess.run(server, ["--user", "alice", "backup", longName], environment: ["KVOD_PASSWORD": "root"])
        #expect(tooLong.status == 2 && tooLong.stderr.contains("cannot create"), "\(tooLong.stderr)")
        FileManager.default.createFile(atPath: scratch.appending("exists.kvod"), contents: Data("keep".utf8))
        let exists = try KVOClientProcess.run(server, ["--user", "alice", "backup", scratch.appending("exists.kvod")], environment: ["KVOD_PASSWORD": "root"])
        #expect(exists.status == 2 && exists.stderr.contains("exists"), "\(exists.stderr)")
        expectEqual(FileManager.default.contents(atPath: scratch.appending("exists.kvod")), Data("keep".utf8))

        // A server without a database has nothing to back up or compact.
        let memory = try KVODProcess()
        defer { memory.stop() }
        expectEqual(errorCode(try memory.connect().request("backup")), "unsupported")
        expectEqual(errorCode(try memory.connect().request("compact")), "unsupported")
    }

    @Test("a client that goes away mid-backup leaves nothing behind on the server")
    func clientGoneLeavesNothing() throws {
        let scratch = try TemporaryDirectory("net-backup-gone")
        let data = scratch.appending("data")
        let server = try KVODProcess(dataDirectory: data)
        defer { server.stop() }
        let writer = try server.connect()
        // About 16 MB: some 80 chunks, so that a client can be stopped half-way.
        let padding = JSONValue.string(String(repeating: "p", count: 40_000))
        for index in 0..<400 { try writer.call("create", ["object": .string("o\(index)"), "values": ["pad": padding]]) }
        let partial = data + "/" + partialName

        // Gone after its first chunk.
        let first = try server.connect()
        let started = try first.call("backup", timeout: 60)
        #expect((started["bytes"]?.intValue ?? 0) > Int64(BackupChunk.most))
        _ = try first.call("backup", ["offset": 0])
        #expect(FileManager.default.fileExists(atPath: partial))
        first.close()
        #expect(eventually { !FileManager.default.fileExists(atPath: partial) }, "\(server.log)")

        // Gone while the copy is being made.
        let second = try server.connect()
        try second.send(["op": "backup", "id": 1])
        second.close()
        #expect(eventually { server.log.contains("backup given up") })
        #expect(eventually { !FileManager.default.fileExists(atPath: partial) }, "\(server.log)")

        // A kvoclient killed mid-way: the server's copy goes; the client's own partial file is all that is left.
        let file = scratch.appending("killed.kvod")
        let client = try KVOClientProcess.start(server, ["backup", file])
        #expect(eventually { FileManager.default.fileExists(atPath: partial) || !client.process.isRunning })
        kill(client.process.processIdentifier, SIGKILL)
        client.process.waitUntilExit()
        #expect(eventually { !FileManager.default.fileExists(atPath: partial) }, "\(server.log)")
        #expect(!FileManager.default.fileExists(atPath: file))
        // The server serves on, and the next backup is taken.
        let next = try KVOClientProcess.run(server, ["backup", scratch.appending("next.kvod")], timeout: 60)
        expectEqual(next.status, 0, "\(next.stderr)")
        let metrics = try server.connect().call("metrics")["text"]?.stringValue ?? ""
        #expect(metrics.contains("kvod_backups_total{result=\"completed\"} 1"), "\(metrics)")
        #expect(metrics.contains("kvod_backups_total{result=\"failed\"} "), "\(metrics)")
        #expect(!metrics.contains("kvod_backups_total{result=\"failed\"} 0"), "\(metrics)")
    }

    @Test("kvod verify accepts a backup and refuses truncated, damaged, random, empty, foreign and missing files")
    func verify() throws {
        let scratch = try TemporaryDirectory("verify")
        let data = scratch.appending("data")
        let server = try KVODProcess(dataDirectory: data)
        let writer = try server.connect()
        let padding = JSONValue.string(String(repeating: "v", count: 2000))
        for index in 0..<200 { try writer.call("create", ["object": .string("o\(index)"), "values": ["pad": padding]]) }
        expectEqual(server.stop(), 0)
        let good = scratch.appending("good.kvod")
        expectEqual(try kvod(["backup", "--data", data, good]).status, 0)
        let accepted = try kvod(["verify", good])
        #expect(accepted.status == 0 && accepted.stdout.contains("revision 200, 200 objects"), "\(accepted.stdout)\(accepted.stderr)")
        let bytes = try #require(FileManager.default.contents(atPath: good))
        #expect(bytes.count > 64 << 10)

        var damagedBytes = bytes
        for index in stride(from: bytes.count / 2, to: bytes.count / 2 + 8192, by: 1) { damagedBytes[index] = UInt8(truncatingIfNeeded: index &* 31) }
        var random = Data(count: 64 << 10)
        for index in random.indices { random[index] = UInt8.random(in: 0...255) }
        let files: [(String, Data?)] = [
            ("truncated", bytes.prefix(bytes.count / 2)), ("damaged", damagedBytes), ("random", random), ("empty", Data()),
            ("header-only", bytes.prefix(100)),
        ]
        for (name, contents) in files {
            let path = scratch.appending(name)
            FileManager.default.createFile(atPath: path, contents: contents)
            let before = FileManager.default.contents(atPath: path)
            let refused = try kvod(["verify", path])
            expectEqual(refused.status, 1, "\(name): \(refused.stdout)")
            #expect(refused.stderr.hasPrefix("kvod verify: error: '\(path)' is not a whole kvod database ("), "\(name): \(refused.stderr)")
            expectEqual(FileManager.default.contents(atPath: path), before, "\(name) was changed")
        }
        let foreign = scratch.appending("foreign.sqlite3")
        try SQLiteFile.execute("CREATE TABLE t(x); INSERT INTO t VALUES(1);", at: foreign, creating: true)
        let notKVOD = try kvod(["verify", foreign])
        #expect(notKVOD.status == 1 && notKVOD.stderr.contains("meta"), "\(notKVOD.stderr)")
        let missing = try kvod(["verify", scratch.appending("missing")])
        #expect(missing.status == 1 && missing.stderr.contains("No such file"), "\(missing.stderr)")
        expectEqual(try kvod(["verify"]).status, 2)
    }
}

/// The most bytes of the copy one `backup` chunk carries (`BackupTransfers.chunkBytes`).
private enum BackupChunk {
    static let most = 192 << 10
}
