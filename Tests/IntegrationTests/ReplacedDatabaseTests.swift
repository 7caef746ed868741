import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Issue 42, defect 1: a database file replaced while kvod runs (a backup moved over it) left kvod's own
/// write-ahead log beside the new file, and the next start applied it there: refused as malformed, or started
/// silently on the old state. Now a kvod that stops with its database replaced sets its log aside, and a start
/// sets aside a log the data directory's marker shows was written for another file (a kvod that was killed).
/// Ordinary stops, crashes, copied directories and `kvod restore` set nothing aside. The real kvod over TCP.
@Suite("a database replaced while kvod runs")
struct ReplacedDatabaseTests {
    /// A data directory in use by a kvod, with a backup taken part-way through its writes.
    private struct Scene {
        let server: KVODProcess
        let data: String
        let database: String
        let backup: String
        /// The backup's revision (`kvod backup`'s line) and its `counter.n`.
        let backupRevision: Int64
        let backupCount: Int64
        /// The revision and `counter.n` after the writes that followed the backup.
        let lastRevision: Int64
        let lastCount: Int64
    }

    private func kvod(_ arguments: [String]) throws -> KVODUserTool.Result {
        try KVODUserTool.runKVOD(arguments, environment: ProcessInfo.processInfo.environment)
    }

    /// `device D inode I` of the file at `path`, as the marker and the log lines name it (nil: none).
    private func identity(_ path: String) -> String? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return "device \(UInt64(info.st_dev)) inode \(UInt64(info.st_ino))"
    }

    private func size(_ path: String) -> Int {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : -1
    }

    /// The names in `directory` that contain `text`.
    private func names(in directory: String, containing text: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.contains(text) }.sorted()
    }

    /// Sets `counter.n` to `from...to`, one write (one revision) each; the last revision.
    @discardableResult
    private func countUp(_ client: KVOConnection, from: Int, to: Int) throws -> Int64 {
        var revision: Int64 = 0
        for n in from...to {
            revision = try #require(try client.call("set", ["object": "counter", "keyPath": "n", "value": .int(Int64(n))])["rev"]?.intValue)
        }
        return revision
    }

    /// A kvod on a new directory in `scratch`: `counter` created and counted to 20, a `kvod backup` taken, then
    /// counted on to 50 (those commits are in the WAL only: checkpoints start at 4 MiB).
    private func makeScene(_ scratch: TemporaryDirectory) throws -> Scene {
        let data = scratch.appending("data")
        let server = try KVODProcess(dataDirectory: data)
        let client = try server.connect()
        try client.call("create", ["object": "counter", "values": ["n": 0]])
        let atBackup = try countUp(client, from: 1, to: 20)
        let backup = scratch.appending("backup.sqlite3")
        let made = try kvod(["backup", "--data", data, backup])
        expectEqual(made.status, 0, "\(made.stderr)")
        #expect(made.stdout.hasPrefix("wrote \(backup): revision \(atBackup), "), "\(made.stdout)")
        let last = try countUp(client, from: 21, to: 50)
        let database = data + "/kvod.sqlite3"
        #expect(size(database + "-wal") > 0, "the later commits are in the write-ahead log")
        return Scene(server: server, data: data, database: database, backup: backup,
                     backupRevision: atBackup, backupCount: 20, lastRevision: last, lastCount: 50)
    }

    /// Starts kvod on `data` and checks that it serves `count` at `revision` (the next write is `revision + 1`);
    /// its whole log, after a clean stop.
    private func startAndCheck(_ data: String, count: Int64, revision: Int64) throws -> String {
        let server = try KVODProcess(dataDirectory: data)
        let client = try server.connect()
        expectEqual(try client.call("get", ["object": "counter", "keyPath": "n"])["value"]?.intValue, count)
        #expect(try client.call("set", ["object": "counter", "keyPath": "n", "value": 0])["rev"]?.intValue == revision + 1,
                "revisions continue from \(revision)")
        expectEqual(server.stop(), 0)
        #expect(server.waitForLog("stopped; event loop closed cleanly"), "\(server.log)")
        return server.log
    }

    /// Whether `log` says a write-ahead log was set aside or removed, at a start or a stop.
    private func setsAside(_ log: String) -> Bool {
        log.contains(".lost") || log.contains("write-ahead log kvod last had open") || log.contains("this kvod's")
    }

    @Test("replaced by a backup, then SIGTERM: kvod sets its own log aside, and the restart serves the backup's state")
    func replacedThenStopped() throws {
        let scratch = try TemporaryDirectory("replaced-term")
        let scene = try makeScene(scratch)
        let wal = scene.database + "-wal"
        let walBytes = size(wal)
        expectEqual(rename(scene.backup, scene.database), 0)
        #expect(scene.server.waitForLog("the database file '\(scene.database)' was replaced by another file while kvod was running; refusing writes", timeout: 10),
                "\(scene.server.log)")
        #expect(scene.server.log.contains("stop kvod (it then sets its write-ahead log aside, so that no start applies it to another file)"),
                "the critical line's advice: \(scene.server.log)")
        let refused = try scene.server.connect().request("set", ["object": "counter", "keyPath": "n", "value": 99])
        expectEqual(refused["error"]?["code"], "storage_unavailable", "\(refused)")

        expectEqual(scene.server.stop(), 0)
        let log = scene.server.log
        #expect(log.contains("""
            the database file '\(scene.database)' was replaced by another file while kvod was running: moved this kvod's \
            write-ahead log '\(wal)' to '\(wal).lost' rather than leave it where SQLite would apply it
            """), "\(log)")
        #expect(log.contains("removed this kvod's '\(scene.database)-shm' (the index of its write-ahead log)"), "\(log)")
        #expect(size(wal + ".lost") >= walBytes, "the log is kept whole")
        #expect(!FileManager.default.fileExists(atPath: wal) && !FileManager.default.fileExists(atPath: scene.database + "-shm"))

        // The backup's state and revision, not the old log's.
        let restarted = try startAndCheck(scene.data, count: scene.backupCount, revision: scene.backupRevision)
        #expect(!setsAside(restarted), "nothing left to set aside at the start: \(restarted)")
        // The marker names the file now there, and no log after the clean stop.
        let marker = try String(contentsOfFile: scene.data + "/kvod.id", encoding: .utf8)
        let current = try #require(identity(scene.database))
        #expect(marker.contains("database file: \(current)\nwrite-ahead log: none\n"), "\(marker)")
        expectEqual(try names(in: scene.data, containing: ".lost"), ["kvod.sqlite3-wal.lost"])
    }

    @Test("replaced by a backup, then SIGKILL: the start sets the old log aside (the marker names it) and serves the backup's state")
    func replacedThenKilled() throws {
        let scratch = try TemporaryDirectory("replaced-kill")
        let scene = try makeScene(scratch)
        let wal = scene.database + "-wal"
        let oldDatabase = try #require(identity(scene.database))
        let oldLogFile = try #require(identity(wal))
        let marker = try String(contentsOfFile: scene.data + "/kvod.id", encoding: .utf8)
        #expect(marker.contains("database file: \(oldDatabase)\nwrite-ahead log: \(oldLogFile)\n"),
                "the marker names the files kvod has open: \(marker)")
        expectEqual(rename(scene.backup, scene.database), 0)
        scene.server.stop(signal: SIGKILL)
        let oldLog = try #require(FileManager.default.contents(atPath: wal))
        #expect(!oldLog.isEmpty)
        let newDatabase = try #require(identity(scene.database))

        let server = try KVODProcess(dataDirectory: scene.data)
        #expect(server.waitForLog("""
            '\(wal)' is the write-ahead log kvod last had open for the database file \(oldDatabase), but \
            '\(scene.database)' is now another file (\(newDatabase)): the database was replaced while kvod ran or \
            before a kvod that did not stop cleanly was started again: moved it to '\(wal).lost' instead of applying \
            it to a database it was not written for
            """), "\(server.log)")
        #expect(server.waitForLog("removed '\(scene.database)-shm', the index of that write-ahead log"), "\(server.log)")
        expectEqual(FileManager.default.contents(atPath: wal + ".lost"), oldLog, "the old log, kept as it was")
        expectEqual(server.stop(), 0)
        // The backup's state and revision; a second start finds nothing to set aside.
        let again = try startAndCheck(scene.data, count: scene.backupCount, revision: scene.backupRevision)
        #expect(!setsAside(again), "\(again)")
        expectEqual(try names(in: scene.data, containing: ".lost"), ["kvod.sqlite3-wal.lost"])
    }

    @Test("a write-ahead log at the path that is not this kvod's (made after the replacement) is left alone at the stop")
    func foreignLogIsLeftAlone() throws {
        let scratch = try TemporaryDirectory("replaced-foreign")
        let scene = try makeScene(scratch)
        let wal = scene.database + "-wal"
        expectEqual(rename(scene.backup, scene.database), 0)
        // Another process's files at the paths (kvod still has its own open: their names are gone).
        let foreign = Data("another process's log".utf8)
        #expect(unlink(wal) == 0 && unlink(scene.database + "-shm") == 0)
        #expect(FileManager.default.createFile(atPath: wal, contents: foreign))
        #expect(scene.server.waitForLog("was replaced by another file while kvod was running", timeout: 10), "\(scene.server.log)")
        expectEqual(scene.server.stop(), 0)
        #expect(scene.server.log.contains("left '\(wal)' where it is: it is not the write-ahead log this kvod wrote"), "\(scene.server.log)")
        expectEqual(FileManager.default.contents(atPath: wal), foreign, "untouched")
        #expect(try names(in: scene.data, containing: ".lost").isEmpty)
    }

    @Test("nothing is set aside: a clean stop, a crash, a directory copied whole, an older marker, kvod restore --replace")
    func ordinaryStartsSetNothingAside() throws {
        let scratch = try TemporaryDirectory("replaced-none")
        let scene = try makeScene(scratch)
        let database = scene.database
        // A clean stop and start.
        expectEqual(scene.server.stop(), 0)
        #expect(!setsAside(scene.server.log), "\(scene.server.log)")
        #expect(!FileManager.default.fileExists(atPath: database + "-wal"), "SQLite copied the log into the database")
        var log = try startAndCheck(scene.data, count: scene.lastCount, revision: scene.lastRevision)
        #expect(!setsAside(log), "\(log)")

        // A crash: its log holds acknowledged commits, applied at the next start, here and in a copy of the
        // directory (every file a new inode, the marker naming the originals).
        var server = try KVODProcess(dataDirectory: scene.data)
        var revision = try countUp(server.connect(), from: 1, to: 30)
        server.stop(signal: SIGKILL)
        #expect(size(database + "-wal") > 0)
        let copy = scratch.appending("copy")
        try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: false)
        for name in ["kvod.sqlite3", "kvod.sqlite3-wal", "kvod.id"] {
            try FileManager.default.copyItem(atPath: scene.data + "/" + name, toPath: copy + "/" + name)
        }
        log = try startAndCheck(copy, count: 30, revision: revision)
        #expect(!setsAside(log), "\(log)")
        log = try startAndCheck(scene.data, count: 30, revision: revision)
        #expect(!setsAside(log), "\(log)")
        revision += 1

        // A marker of a kvod older than the identity lines, after a crash: read as before, its lines recorded.
        server = try KVODProcess(dataDirectory: scene.data)
        revision = try countUp(server.connect(), from: 1, to: 40)
        server.stop(signal: SIGKILL)
        let markerPath = scene.data + "/kvod.id"
        let marker = try String(contentsOfFile: markerPath, encoding: .utf8)
        let older = marker.split(separator: "\n", omittingEmptySubsequences: false)
            .filter { !$0.hasPrefix("database file:") && !$0.hasPrefix("write-ahead log:") }.joined(separator: "\n")
        try older.write(toFile: markerPath, atomically: true, encoding: .utf8)
        server = try KVODProcess(dataDirectory: scene.data)
        expectEqual(try server.connect().call("get", ["object": "counter", "keyPath": "n"])["value"], 40)
        let recorded = try String(contentsOfFile: markerPath, encoding: .utf8)
        let databaseFile = try #require(identity(database))
        #expect(recorded.contains("database file: \(databaseFile)\n"), "\(recorded)")
        #expect(recorded.hasPrefix(marker.split(separator: "\n").prefix(3).joined(separator: "\n")), "the id and time kept: \(recorded)")

        // A backup restored over the database of a killed kvod: its log goes with the database restore sets
        // aside, the marker names the restored file, and kvod starts on it.
        let backup = scratch.appending("later-backup.sqlite3")
        expectEqual(try kvod(["backup", "--data", scene.data, backup]).status, 0)
        try countUp(server.connect(), from: 41, to: 45)
        server.stop(signal: SIGKILL)
        let restore = try kvod(["restore", "--data", scene.data, "--replace", backup])
        expectEqual(restore.status, 0, "\(restore.stderr)")
        let restoredMarker = try String(contentsOfFile: markerPath, encoding: .utf8)
        let restoredFile = try #require(identity(database))
        #expect(restoredMarker.contains("database file: \(restoredFile)\nwrite-ahead log: none\n"), "\(restoredMarker)")
        log = try startAndCheck(scene.data, count: 40, revision: revision)
        #expect(!setsAside(log), "\(log)")
        #expect(try names(in: scene.data, containing: ".lost").isEmpty)
    }
}
