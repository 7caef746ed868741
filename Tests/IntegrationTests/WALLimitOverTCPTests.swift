import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// `--wal-limit` against the real kvod over TCP (issue 13): checkpoints run off the event loop, and when
/// they fall behind (made slow here with the test hook `KVOD_TEST_CHECKPOINT_DELAY_MS`) a blocking
/// checkpoint on the loop keeps the WAL file within the limit plus one group commit; every acknowledged
/// write is there after a SIGKILL and a restart.
@Suite struct WALLimitOverTCPTests {
    private static let limit = 1 << 20
    private static let objects = 20

    /// Writes `batches` pipelined batches of 50 sets of ~600-byte values; returns the last value
    /// acknowledged per object, the last revision, and the largest WAL file seen after a batch.
    private func write(_ client: KVOConnection, batches: Int, walPath: String)
        throws -> (values: [String: JSONValue], rev: Int64, largestWAL: Int) {
        let padding = String(repeating: "p", count: 600)
        var values: [String: JSONValue] = [:]
        var rev: Int64 = 0
        var largestWAL = 0
        var index = 0
        for _ in 0..<batches {
            var lines: [UInt8] = []
            var sent: [(String, JSONValue)] = []
            for _ in 0..<50 {
                index += 1
                let object = "o-\(index % Self.objects)"
                let value = JSONValue.string("\(index)-\(padding)")
                lines += JSONWriter.bytes(["op": "set", "id": .int(Int64(index)), "object": .string(object), "keyPath": "v",
                                           "value": value]) + [0x0A]
                sent.append((object, value))
            }
            try client.send(raw: lines)
            for (offset, (object, value)) in sent.enumerated() {
                let reply = try client.readMessage()
                #expect(reply["ok"] == true && reply["id"] == .int(Int64(index - 49 + offset)), "\(reply)")
                values[object] = value
                rev = reply["rev"]?.intValue ?? rev
            }
            let size = (try? FileManager.default.attributesOfItem(atPath: walPath)[.size] as? Int) ?? 0
            largestWAL = max(largestWAL, size)
        }
        return (values, rev, largestWAL)
    }

    private func start(_ data: String, slowCheckpoints: Bool) throws -> KVODProcess {
        try KVODProcess(["--wal-limit", String(Self.limit)], storage: .directory(data),
                        shellPrefix: slowCheckpoints ? "export KVOD_TEST_CHECKPOINT_DELAY_MS=4000" : nil)
    }

    private func create(_ client: KVOConnection) throws {
        for number in 0..<Self.objects { try client.call("create", ["object": .string("o-\(number)"), "values": ["v": 0]]) }
    }

    private func expectStored(_ server: KVODProcess, _ written: (values: [String: JSONValue], rev: Int64, largestWAL: Int)) throws {
        let reader = try server.connect()
        for (object, value) in written.values {
            let reply = try reader.call("get", ["object": .string(object), "keyPath": "v"])
            expectEqual(reply["value"], value, "\(object)")
            expectEqual(reply["rev"], .int(written.rev))
        }
    }

    @Test("background checkpoints too slow: blocking checkpoints keep the WAL bounded; SIGKILL loses nothing")
    func blockingFallback() throws {
        let scratch = try TemporaryDirectory("wal-limit")
        let data = scratch.appending("data")
        let server = try start(data, slowCheckpoints: true)
        let client = try server.connect()
        try create(client)
        let written = try write(client, batches: 120, walPath: data + "/kvod.sqlite3-wal")
        #expect(server.waitForLog("blocking checkpoint", timeout: 10), "the fallback ran and said so")
        // The limit plus at most one group commit (50 sets of ~700 bytes, their history rows and pages).
        #expect(written.largestWAL <= Self.limit + (512 << 10), "largest WAL \(written.largestWAL) bytes")
        let restarted = try server.restart(after: SIGKILL)
        try expectStored(restarted, written)
    }

    @Test("checkpoints off the loop keep the WAL bounded under a steady stream of writes; a restart loses nothing")
    func backgroundCheckpoints() throws {
        let scratch = try TemporaryDirectory("wal-limit")
        let data = scratch.appending("data")
        let server = try start(data, slowCheckpoints: false)
        let client = try server.connect()
        try create(client)
        let written = try write(client, batches: 120, walPath: data + "/kvod.sqlite3-wal")
        #expect(written.largestWAL <= Self.limit + (512 << 10), "largest WAL \(written.largestWAL) bytes; log: \(server.log)")
        // A blocking checkpoint that finds a background one copying waits for it (the busy handler does
        // not cover the checkpoint lock): it never gives up here.
        #expect(!server.log.contains("could not empty it"), "\(server.log)")
        let restarted = try server.restart(after: SIGKILL)
        try expectStored(restarted, written)
    }
}
