import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// `kvod backup` and `kvod restore` (the real kvod binary; docs/protocol.md, "Backups"): a backup taken while
/// a client writes holds exactly the writes up to its revision and restores into a kvod that continues from
/// it; refusals (an existing file, no database, a running kvod, a database in the way, a damaged or foreign
/// file) change nothing; a lost database's leftover log is set aside.
@Suite("kvod backup and restore")
struct BackupRestoreTests {
    private func kvod(_ arguments: [String]) throws -> KVODUserTool.Result {
        try KVODUserTool.runKVOD(arguments, environment: ProcessInfo.processInfo.environment)
    }

    private func mode(_ path: String) -> mode_t {
        var info = stat()
        return stat(path, &info) == 0 ? info.st_mode & 0o777 : 0
    }

    private func bytes(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

    /// "revision R" in a backup's or a restore's line.
    private func revisionNumber(in line: String) -> Int? {
        guard let range = line.range(of: "revision ") else { return nil }
        return Int(line[range.upperBound...].prefix { $0.isNumber })
    }

    @Test("a backup taken under writes restores every write up to its revision, and revisions continue")
    func backupUnderWritesRestores() throws {
        let scratch = try TemporaryDirectory("backup")
        let data = scratch.appending("data")
        let server = try KVODProcess(dataDirectory: data)
        let client = try server.connect()
        // Revision 1 creates the counter; revision k + 1 sets it to k. A second object with a structured value.
        try client.call("create", ["object": "counter", "values": ["n": 0, "label": ["text": "ü", "tags": ["a", "b"]]]])
        let stop = Locked(false)
        let writes = Locked(0)
        let writer = Thread {
            guard let connection = try? server.connect() else { return }
            var n = 0
            while !stop.value {
                n += 1
                guard (try? connection.call("set", ["object": "counter", "keyPath": "n", "value": .int(Int64(n))])) != nil else { return }
                writes.value = n
            }
        }
        writer.start()
        /// Waits (at most 120 s: a starved CI run) until `condition` holds; false if it never did.
        func waitFor(_ condition: () -> Bool) -> Bool {
            let deadline = Date().addingTimeInterval(120)
            while !condition(), Date() < deadline { usleep(5_000) }
            return condition()
        }
        try #require(waitFor { writes.value >= 200 }, "the writer stopped at \(writes.value) sets")
        let backupFile = scratch.appending("kvod-backup.sqlite3")
        let backup = try kvod(["backup", "--data", data, backupFile])
        // Writes go on after the backup: it must hold none of them.
        let afterBackup = writes.value
        try #require(waitFor { writes.value >= afterBackup + 50 }, "the writer stopped at \(writes.value) sets")
        stop.value = true
        try #require(waitFor { writer.isFinished })
        expectEqual(backup.status, 0, "\(backup.stderr)")
        #expect(backup.stdout.hasPrefix("wrote \(backupFile): revision "), "\(backup.stdout)")
        let revision = try #require(revisionNumber(in: backup.stdout))
        #expect(revision > 200 && revision <= afterBackup + 2, "backup at \(revision), \(afterBackup) sets when it ended")
        expectEqual(mode(backupFile), 0o600)
        #expect(!FileManager.default.fileExists(atPath: backupFile + ".partial"))
        expectEqual(server.stop(), 0)

        let restoredData = scratch.appending("restored")
        let restore = try kvod(["restore", "--data", restoredData, backupFile])
        expectEqual(restore.status, 0, "\(restore.stderr)")
        #expect(restore.stdout.hasPrefix("restored \(backupFile) into \(restoredData): revision \(revision), 1 object, "
                + "\(revision) history rows, schema "), "\(restore.stdout)")
        let restored = try KVODProcess(dataDirectory: restoredData)
        let reader = try restored.connect()
        let value = try reader.call("get", ["object": "counter"])
        expectEqual(value["value"]?["n"]?.intValue, Int64(revision - 1), "\(value)")
        expectEqual(value["value"]?["label"], ["text": "ü", "tags": ["a", "b"]])
        // History came along: a resume from five revisions back replays them.
        let sub = try reader.call("observe", ["object": "counter", "keyPath": "n", "sinceRev": .int(Int64(revision - 5))])["sub"]
        var replayed: [JSONValue] = []
        while replayed.count < 5, let event = try reader.nextEvent(timeout: 5) {
            if event["sub"] == sub { replayed.append(event) }
        }
        expectEqual(replayed.map { $0["change"]?["new"]?.intValue }, (revision - 5..<revision).map { Int64($0) })
        #expect(try reader.call("set", ["object": "counter", "keyPath": "n", "value": 0])["rev"]?.intValue == Int64(revision + 1),
                "revisions continue after the backup's")
        expectEqual(restored.stop(), 0)
    }

    @Test("refusals: an existing file, no database, a running kvod, a database in the way, damaged or foreign files")
    func refusalsChangeNothing() throws {
        let scratch = try TemporaryDirectory("backup-refusals")
        let data = scratch.appending("data")
        let server = try KVODProcess(dataDirectory: data)
        try server.connect().call("create", ["object": "o", "values": ["v": 1]])
        let backupFile = scratch.appending("b.sqlite3")
        expectEqual(try kvod(["backup", "--data", data, backupFile]).status, 0)

        // Never over an existing file.
        let again = try kvod(["backup", "--data", data, backupFile])
        #expect(again.status == 1 && again.stderr.contains("kvod backup: error: '\(backupFile)' exists"), "\(again.stderr)")
        // A directory without a database.
        let empty = try kvod(["backup", "--data", scratch.appending("nothing"), scratch.appending("c.sqlite3")])
        #expect(empty.status == 1 && empty.stderr.contains("holds no kvod database"), "\(empty.stderr)")
        #expect(!FileManager.default.fileExists(atPath: scratch.appending("c.sqlite3")))
        // A usage error: no --data.
        expectEqual(try kvod(["backup", scratch.appending("d.sqlite3")]).status, 2)
        // Not while kvod runs.
        let database = data + "/kvod.sqlite3"
        let running = try kvod(["restore", "--data", data, "--replace", backupFile])
        #expect(running.status == 1 && running.stderr.contains("in use by a running kvod"), "\(running.stderr)")
        try server.connect().call("set", ["object": "o", "keyPath": "v", "value": 2])
        expectEqual(server.stop(), 0)
        let before = bytes(database)

        // A database in the way: refused without --replace.
        let inTheWay = try kvod(["restore", "--data", data, backupFile])
        #expect(inTheWay.status == 1 && inTheWay.stderr.contains("pass --replace"), "\(inTheWay.stderr)")
        expectEqual(bytes(database), before)
        // Damaged backups and foreign files change nothing.
        let damaged = scratch.appending("damaged.sqlite3")
        var cut = try #require(bytes(backupFile))
        cut.replaceSubrange(cut.count / 2..<cut.count, with: Data(repeating: 0x5A, count: cut.count - cut.count / 2))
        FileManager.default.createFile(atPath: damaged, contents: cut)
        let garbage = scratch.appending("garbage.sqlite3")
        FileManager.default.createFile(atPath: garbage, contents: Data("not a database at all".utf8))
        let foreign = scratch.appending("foreign.sqlite3")
        let sqlite = Process()
        sqlite.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        sqlite.arguments = ["python3", "-c", "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('create table t(x)'); c.commit()", foreign]
        try sqlite.run()
        sqlite.waitUntilExit()
        let own = try kvod(["restore", "--data", data, "--replace", database])
        #expect(own.status == 1 && own.stderr.contains("the data directory's own database"), "\(own.stderr)")
        expectEqual(bytes(database), before)
        for file in [damaged, garbage, foreign, scratch.appending("missing.sqlite3")] {
            let refused = try kvod(["restore", "--data", data, "--replace", file])
            #expect(refused.status == 1 && refused.stderr.contains("is not a whole kvod database"), "\(file): \(refused.stderr)")
            expectEqual(bytes(database), before, "\(file)")
        }
        #expect(FileManager.default.fileExists(atPath: foreign), "the foreign file was made")
        #expect(try FileManager.default.contentsOfDirectory(atPath: data).allSatisfy { !$0.contains("replaced") }, "nothing set aside")

        // With --replace: the current database is set aside whole and still opens; the backup's state is back.
        let replaced = try kvod(["restore", "--data", data, "--replace", backupFile])
        expectEqual(replaced.status, 0, "\(replaced.stderr)")
        let aside = try #require(replaced.stdout.split(separator: "\n").first.map(String.init)).replacingOccurrences(of: "set aside ", with: "")
        #expect(aside.hasPrefix(database + ".replaced-") && bytes(aside) == before, "\(replaced.stdout)")
        // Twice more at once (the same second, or the next): each set-aside database keeps a name of its own, and
        // the first one is still whole (issue 42: the second rename replaced it).
        let restored = bytes(database)
        let second = try kvod(["restore", "--data", data, "--replace", backupFile])
        let third = try kvod(["restore", "--data", data, "--replace", backupFile])
        #expect(second.status == 0 && third.status == 0, "\(second.stderr) \(third.stderr)")
        let asides: [String] = [second, third].compactMap { run in
            run.stdout.split(separator: "\n").first.map { String($0).replacingOccurrences(of: "set aside ", with: "") }
        }
        expectEqual(Set(asides + [aside]).count, 3, "three set-aside names: \(asides) \(aside)")
        expectEqual(bytes(aside), before, "the first set-aside database is untouched")
        for other in asides { #expect(bytes(other) == restored, "\(other)") }
        let restarted = try KVODProcess(dataDirectory: data)
        expectEqual(try restarted.connect().call("get", ["object": "o"])["value"], ["v": 1])
        expectEqual(restarted.stop(), 0)
    }

    @Test("a lost database: kvod refuses to start; restore sets the leftover log aside and kvod starts on the backup")
    func restoreRecoversALostDatabase() throws {
        let scratch = try TemporaryDirectory("backup-lost")
        let data = scratch.appending("data")
        let server = try KVODProcess(dataDirectory: data)
        try server.connect().call("create", ["object": "o", "values": ["v": 1]])
        let backupFile = scratch.appending("b.sqlite3")
        expectEqual(try kvod(["backup", "--data", data, backupFile]).status, 0)
        try server.connect().call("set", ["object": "o", "keyPath": "v", "value": 2])
        // SIGKILL keeps the -wal; then the database is lost.
        server.stop(signal: SIGKILL)
        let database = data + "/kvod.sqlite3"
        expectEqual(unlink(database), 0)
        #expect(throws: KVODProcessError.self) { try KVODProcess(dataDirectory: data) }
        let hadWAL = FileManager.default.fileExists(atPath: database + "-wal")
        let restore = try kvod(["restore", "--data", data, backupFile])
        expectEqual(restore.status, 0, "\(restore.stderr)")
        expectEqual(restore.stdout.contains("set aside \(database).replaced-"), hadWAL, "\(restore.stdout)")
        let restarted = try KVODProcess(dataDirectory: data)
        expectEqual(try restarted.connect().call("get", ["object": "o"])["value"], ["v": 1], "the backup's state, not the lost log's")
        expectEqual(restarted.stop(), 0)
    }
}

/// A value shared between the test and its writer thread.
private final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value
    init(_ value: Value) { stored = value }
    var value: Value {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}
