import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Issue 10 item 6: with `--data`, what a write costs on disk follows the size of the change, not of
/// the object (snapshot plus redo log), and a restart reproduces every acknowledged state exactly, in
/// every sync mode, after redo replay and after snapshot rewrites.
@Suite("storage cost over TCP")
struct StorageCostOverTCPTests {
    /// Bytes the process has passed to write(2) and pwrite(2) so far (`wchar` of /proc/PID/io): what
    /// SQLite wrote to the WAL and the database, whatever the file system does with it.
    static func bytesWritten(_ process: Process) throws -> Int {
        let text = try String(contentsOfFile: "/proc/\(process.processIdentifier)/io", encoding: .utf8)
        for line in text.split(separator: "\n") where line.hasPrefix("wchar:") {
            return Int(line.dropFirst("wchar:".count).trimmingCharacters(in: .whitespaces)) ?? -1
        }
        return -1
    }

    static func text(_ count: Int, _ fill: Character = "x") -> JSONValue { .string(String(repeating: fill, count: count)) }

    @Test("inserts and small sets on a 4 MB object write about what they change, quickly, and survive a restart",
          arguments: ["off", "normal", "full"])
    func writesToALargeObjectCostTheirChange(sync: String) throws {
        let directory = try TemporaryDirectory("storage-cost-\(sync)")
        let server = try KVODProcess(["--sync", sync], dataDirectory: directory.appending("data"))
        let client = try server.connect()
        try client.call("create", ["object": "big", "values": ["list": [], "n": 0]])
        for index in 0..<5 {
            try client.call("insert", ["object": "big", "keyPath": "list", "values": [Self.text(800_000, Array("abcde")[index])]],
                            timeout: 120)
        }

        // 40 inserts of 10 KB: 400 KB of changes. Rewriting the object each time would write 40 x 4 MB.
        let beforeInserts = try Self.bytesWritten(server.process)
        for index in 0..<40 {
            try client.call("insert", ["object": "big", "keyPath": "list", "index": 0, "values": [Self.text(10_000, "\(index % 10)".first!)]])
        }
        let insertBytes = try Self.bytesWritten(server.process) - beforeInserts
        #expect(insertBytes >= 400_000 && insertBytes < 16_000_000, "40 inserts of 10 KB wrote \(insertBytes) bytes")

        // 100 small sets: each a few bytes of change.
        let beforeSets = try Self.bytesWritten(server.process)
        let start = Date()
        for n in 1...100 { try client.call("set", ["object": "big", "keyPath": "n", "value": .int(Int64(n))]) }
        let seconds = Date().timeIntervalSince(start)
        let setBytes = try Self.bytesWritten(server.process) - beforeSets
        #expect(setBytes < 8_000_000, "100 small sets wrote \(setBytes) bytes")
        #expect(seconds < 10, "100 small sets took \(seconds) s")

        let acknowledged = try client.call("get", ["object": "big"], timeout: 120)["value"]
        expectEqual(acknowledged?["n"], 100)
        expectEqual(acknowledged?["list"]?.arrayValue?.count, 45)
        let restarted = try server.restart()
        expectEqual(try restarted.connect().call("get", ["object": "big"], timeout: 120)["value"], acknowledged)
    }

    @Test("many writes through snapshot rewrites and redo, with deletes and re-creates, restart exactly",
          arguments: ["off", "normal", "full"])
    func restartReproducesStateAfterCompaction(sync: String) throws {
        let directory = try TemporaryDirectory("storage-compaction-\(sync)")
        let server = try KVODProcess(["--sync", sync], dataDirectory: directory.appending("data"))
        let client = try server.connect()
        try client.call("create", ["object": "a", "values": ["list": [], "pad": Self.text(2000)]])
        try client.call("create", ["object": "b", "values": ["v": 0]])
        for step in 0..<300 {
            switch step % 6 {
            case 0, 1: try client.call("set", ["object": "a", "keyPath": .string("k\(step % 13)"), "value": .int(Int64(step))])
            case 2: try client.call("insert", ["object": "a", "keyPath": "list", "values": [Self.text(step % 50)]])
            case 3: if step % 4 == 1 { try client.call("remove", ["object": "a", "keyPath": "list", "index": 0]) }
            case 4: try client.call("set", ["object": "b", "keyPath": "v", "value": ["step": .int(Int64(step))]])
            default:
                if step % 30 == 5 {
                    try client.call("delete", ["object": "b"])
                    try client.call("create", ["object": "b", "values": ["v": .int(Int64(step))]])
                }
            }
        }
        let before = try ["a", "b"].map { try client.call("get", ["object": .string($0)])["value"] }
        let revision = try currentRevision(client, object: "a")
        let restarted = try server.restart(after: SIGKILL)
        let again = try restarted.connect()
        expectEqual(try ["a", "b"].map { try again.call("get", ["object": .string($0)])["value"] }, before)
        expectEqual(try currentRevision(again, object: "a"), revision)
    }
}
