import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Issue 42, item 9: space given back without stopping kvod (docs/design.md, "Reclaiming space"), against the real
/// kvod over TCP: at `--max-disk` deletes are still taken, `kvoclient compact` shrinks the file and writes resume;
/// the automatic incremental vacuum gives freed pages back by itself; a database of an older kvod (auto-vacuum off)
/// is switched once at start-up.
@Suite("reclaiming space", .serialized)
struct CompactionTests {
    private func errorCode(_ reply: JSONValue) -> String? { reply["error"]?["code"]?.stringValue }

    private func fileSize(_ path: String) -> Int {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : -1
    }

    private func metric(_ server: KVODProcess, _ name: String) throws -> Int {
        let text = try server.connect().call("metrics")["text"]?.stringValue ?? ""
        for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
            return Int(Double(line.dropFirst(name.count + 1)) ?? -1)
        }
        return -1
    }

    /// Waits (at most `seconds`) until `condition` holds.
    private func eventually(_ seconds: Double = 30, _ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            if try condition() { return true }
            if Date() >= deadline { return false }
            usleep(20_000)
        }
    }

    @Test("at --max-disk a delete is taken, a compact shrinks the file, and writes resume")
    func deleteAndCompactAtTheLimit() throws {
        let scratch = try TemporaryDirectory("compact-limit")
        let data = scratch.appending("data")
        let database = data + "/kvod.sqlite3"
        // A short history: the deleted objects' values are not kept in it, so their pages are freed.
        let server = try KVODProcess(["--max-disk", "3000000", "--history", "10"], dataDirectory: data)
        defer { server.stop() }
        let writer = try server.connect()
        let (acknowledged, refusal) = try StorageFullTests.createUntilRefused(writer, prefix: "q")
        let refused = try #require(refusal, "--max-disk 3000000 never reached")
        expectEqual(errorCode(refused), "storage_full", "\(refused)")
        let atLimit = fileSize(database) + fileSize(database + "-wal")
        #expect(atLimit >= 2_000_000, "\(atLimit)")
        // Still refused: writes that could add. Taken: deletes (and the rest of the rows that only remove).
        expectEqual(errorCode(try writer.request("set", ["object": .string(acknowledged[0]), "keyPath": "n", "value": 1])), "storage_full")
        expectEqual(errorCode(try writer.request("create", ["object": "new"])), "storage_full")
        for id in acknowledged { try writer.call("delete", ["object": .string(id)]) }
        expectEqual(errorCode(try writer.request("get", ["object": .string(acknowledged[0])])), "not_found")

        let compact = try KVOClientProcess.run(server, ["compact"], timeout: 60)
        expectEqual(compact.status, 0, "\(compact.stderr)")
        let line = compact.stdout
        #expect(line.hasPrefix("compacted: ") && line.contains(" free pages given back; on disk "), "\(line)")
        let after = fileSize(database) + max(0, fileSize(database + "-wal"))
        #expect(after * 4 < atLimit, "\(atLimit) bytes at the limit, \(after) after compact")
        // Truncated, then only the probe that found the store writable again (a few pages).
        #expect(fileSize(database + "-wal") < 64 << 10, "the WAL is truncated")
        // Writes resume (the store is asked again once the compaction ends).
        var last: JSONValue = .null
        #expect(try eventually(10) {
            last = try writer.request("create", ["object": "after"])
            return last["ok"] == true
        }, "\(last) \(line) \(server.log)")
        expectEqual(try metric(server, "kvod_compactions_total"), 1)
        #expect(try metric(server, "kvod_storage_pages_reclaimed_total") > 50, "\(line)")
        expectEqual(try metric(server, "kvod_storage_state"), 0)
    }

    @Test("the automatic incremental vacuum gives freed pages back without a compact")
    func automaticVacuum() throws {
        let scratch = try TemporaryDirectory("auto-vacuum")
        let data = scratch.appending("data")
        let database = data + "/kvod.sqlite3"
        var server = try KVODProcess(["--history", "10"], dataDirectory: data)
        defer { server.stop() }
        let writer = try server.connect()
        let padding = JSONValue.string(String(repeating: "a", count: 4000))
        for index in 0..<3000 { try writer.call("create", ["object": .string("o\(index)"), "values": ["pad": padding]]) }
        server = try server.restart()
        let full = fileSize(database)
        #expect(full > 12_000_000, "\(full)")
        let deleter = try server.connect()
        for index in 0..<3000 { try deleter.call("delete", ["object": .string("o\(index)")]) }
        // Steps once a second until what is left free is small: wait until the count stops growing.
        var reclaimed = -1
        var steady = 0
        #expect(try eventually(60) {
            let now = try metric(server, "kvod_storage_pages_reclaimed_total")
            steady = now == reclaimed ? steady + 1 : 0
            reclaimed = now
            return now >= 2500 && steady >= 100
        }, "\(reclaimed) pages: \(server.log)")
        // The file is cut short at the checkpoints (at the latest when kvod stops).
        expectEqual(server.stop(), 0)
        #expect(fileSize(database) * 4 < full, "\(full) bytes full, \(fileSize(database)) after deleting everything")
    }

    @Test("a database of an older kvod (auto-vacuum off) is switched once at start-up, and compacts")
    func olderDatabaseIsSwitched() throws {
        let scratch = try TemporaryDirectory("compact-old")
        let data = scratch.appending("data")
        let database = data + "/kvod.sqlite3"
        var server = try KVODProcess(["--history", "10"], dataDirectory: data)
        let writer = try server.connect()
        let padding = JSONValue.string(String(repeating: "b", count: 8000))
        for index in 0..<300 { try writer.call("create", ["object": .string("o\(index)"), "values": ["pad": padding]]) }
        for index in 0..<300 where index % 3 != 0 { try writer.call("delete", ["object": .string("o\(index)")]) }
        expectEqual(server.stop(), 0)
        // As an older kvod left it: no auto-vacuum, free pages in the file.
        try SQLiteFile.execute("PRAGMA auto_vacuum = NONE; VACUUM;", at: database)
        try SQLiteFile.execute("DELETE FROM objects WHERE id IN ('o0', 'o3'); DELETE FROM redo WHERE object IN ('o0', 'o3');", at: database)
        server = try KVODProcess(["--history", "10"], dataDirectory: data)
        defer { server.stop() }
        #expect(try eventually(10) { server.log.contains("was made by an older kvod without incremental vacuum: switched once") }, "\(server.log)")
        let reader = try server.connect()
        expectEqual(try reader.call("get", ["object": "o6", "keyPath": "pad"])["value"], padding)
        expectEqual(errorCode(try reader.request("get", ["object": "o0"])), "not_found")
        let compact = try reader.call("compact", timeout: 60)
        expectEqual(compact["freePages"], 0, "\(compact)")
        expectEqual(compact["logTruncated"], true, "\(compact)")
        // A second start says nothing more.
        server = try server.restart()
        #expect(!server.log.contains("older kvod"), "\(server.log)")
    }
}
