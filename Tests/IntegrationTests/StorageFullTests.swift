import Foundation
import KVOJSON
import KVOWireProbe
import Testing

@testable import KVOTestSupport

/// Issue 27: a full disk is a state, not a crash. kvod's data directory on a small tmpfs fills for real;
/// writes are refused (`storage_full`) while reads, observers and `/readyz` keep answering, nothing
/// acknowledged is lost and nothing unacknowledged is kept (across a restart too), and writes are taken
/// again once space is freed. `--max-disk` is the portable variant (no mount needed).
@Suite("storage full", .serialized)
struct StorageFullTests {
    /// A value of about 8 KiB: a few of them fill a small file system quickly.
    static let padding = JSONValue.string(String(repeating: "x", count: 8 << 10))

    /// Creates `prefix0`, `prefix1`, … (one request at a time) until one is refused; the ids acknowledged
    /// and the refusal.
    static func createUntilRefused(_ client: KVOConnection, prefix: String, limit: Int = 2000) throws -> (acknowledged: [String], refusal: JSONValue?) {
        var acknowledged: [String] = []
        for index in 0..<limit {
            let id = "\(prefix)\(index)"
            let reply = try client.request("create", ["object": .string(id), "values": .object(["pad": padding])])
            guard reply["ok"] == true else { return (acknowledged, reply) }
            acknowledged.append(id)
        }
        return (acknowledged, nil)
    }

    /// Polls `create` of `object` until it is acknowledged (space returned) or `timeout` passes.
    static func waitUntilWritable(_ client: KVOConnection, object: String, timeout: Double = 10) throws -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let reply = try client.request("create", ["object": .string(object)])
            if reply["ok"] == true { return true }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return false
    }

    static func httpBody(_ server: KVODProcess, _ path: String) -> String {
        LocalCluster.httpGet(port: server.httpPort, path: path) ?? "(no answer)"
    }

    @Test("a full disk refuses writes with storage_full, keeps reads and observers, and takes writes again once space is freed",
          .enabled(if: SmallFileSystem.canMount, "needs the right to mount a tmpfs (root)"))
    func fullDiskIsAState() throws {
        let disk = try SmallFileSystem(bytes: 2 << 20)
        let data = disk.appending("data")
        var server = try KVODProcess(["--http-port", "0"], dataDirectory: data)
        defer { server.stop() }
        let observer = try server.connect()
        try observer.call("create", ["object": "watched", "values": ["n": 0]])
        try observer.call("observe", ["object": "watched", "keyPath": "n", "options": ["new"]])
        let writer = try server.connect()

        let (acknowledged, refusal) = try Self.createUntilRefused(writer, prefix: "o")
        let refused = try #require(refusal, "2 MiB never filled")
        expectEqual(refused["error"]?["code"], "storage_full", "\(refused)")
        #expect(acknowledged.count > 10, "only \(acknowledged.count) creates before the disk filled")
        #expect(server.waitForLog("storage full"), "\(server.log)")
        #expect(!server.log.contains("stopping"), "\(server.log)")

        // Every later write is refused, and no observer hears of it; reads and observers go on.
        let set = try writer.request("set", ["object": "watched", "keyPath": "n", "value": 1])
        expectEqual(set["error"]?["code"], "storage_full", "\(set)")
        let get = try writer.call("get", ["object": "watched", "keyPath": "n"])
        expectEqual(get["value"], 0)
        expectEqual(try writer.call("get", ["object": .string(acknowledged[0]), "keyPath": "pad"])["value"], Self.padding)
        try observer.call("ping")
        #expect(observer.pendingEvents.isEmpty, "an observer was told of a refused write: \(observer.pendingEvents)")
        #expect(Self.httpBody(server, "/readyz").contains("storage full"))
        #expect(Self.httpBody(server, "/metrics").contains("kvod_storage_state 1"))

        // Space freed: writes come back by themselves, and observers hear of them.
        try disk.resize(bytes: 16 << 20)
        #expect(try Self.waitUntilWritable(writer, object: "after"), "writes still refused after space was freed: \(server.log)")
        #expect(server.waitForLog("storage writable again"), "\(server.log)")
        #expect(Self.httpBody(server, "/readyz").hasPrefix("ready"))
        try writer.call("set", ["object": "watched", "keyPath": "n", "value": 2])
        let event = try #require(try observer.nextEvent(timeout: 5))
        expectEqual(event["change"]?["new"], 2, "\(event)")

        // Nothing acknowledged was lost.
        server = try server.restart()
        let reader = try server.connect()
        for id in acknowledged + ["after"] {
            expectEqual(try reader.request("get", ["object": .string(id)])["ok"], true, "acknowledged '\(id)' is gone after a restart")
        }
        expectEqual(try reader.call("get", ["object": "watched", "keyPath": "n"])["value"], 2)
    }

    @Test("without a reserve, a commit that finds no room is rolled back: nothing unacknowledged is kept, nothing acknowledged is lost",
          .enabled(if: SmallFileSystem.canMount, "needs the right to mount a tmpfs (root)"))
    func failedCommitRollsBack() throws {
        let disk = try SmallFileSystem(bytes: 2 << 20)
        let data = disk.appending("data")
        var server = try KVODProcess(["--disk-reserve", "0"], dataDirectory: data)
        defer { server.stop() }
        let observer = try server.connect()
        try observer.call("observe", ["pattern": "p*", "options": ["new"]])
        let writer = try server.connect()
        // Pipelined creates: many in one loop iteration, so the failing commit holds several writes.
        var sent: [String] = []
        var acknowledged = Set<String>()
        var refusedOrClosed = false
        for round in 0..<400 where !refusedOrClosed {
            var lines: [UInt8] = []
            for index in 0..<16 {
                let id = "p\(round)-\(index)"
                sent.append(id)
                let request: JSONValue = ["op": "create", "id": .string(id), "object": .string(id), "values": ["pad": Self.padding]]
                lines += Array(JSONWriter.string(request).utf8) + [0x0A]
            }
            try writer.send(raw: lines)
            for _ in 0..<16 {
                guard let reply = try? writer.readMessage(timeout: 10) else { refusedOrClosed = true; break }
                if reply["ok"] == true, let id = reply["id"]?.stringValue { acknowledged.insert(id) } else { refusedOrClosed = true }
            }
        }
        #expect(refusedOrClosed, "2 MiB never filled")
        #expect(server.waitForLog("rolled back to the last commit"), "\(server.log)")
        // The observer was told only of acknowledged writes before its connection was closed.
        var told: [String] = []
        while let event = try? observer.readMessage(timeout: 2) {
            if let object = event["object"]?.stringValue { told.append(object) }
        }
        #expect(told.allSatisfy(acknowledged.contains), "told of unacknowledged writes: \(Set(told).subtracting(acknowledged).sorted().prefix(5))")

        // Reconnected: the rolled-back state is what was acknowledged; writes are refused until space returns.
        let reader = try server.connect()
        for id in sent {
            let found = try reader.request("get", ["object": .string(id)])["ok"] == true
            expectEqual(found, acknowledged.contains(id), "'\(id)': \(found ? "kept" : "lost"), \(acknowledged.contains(id) ? "acknowledged" : "not acknowledged")")
        }
        expectEqual(try reader.request("create", ["object": "more"])["error"]?["code"], "storage_full")
        try disk.resize(bytes: 16 << 20)
        #expect(try Self.waitUntilWritable(reader, object: "more"), "\(server.log)")

        server = try server.restart()
        let again = try server.connect()
        for id in sent {
            let found = try again.request("get", ["object": .string(id)])["ok"] == true
            expectEqual(found, acknowledged.contains(id), "after a restart '\(id)': \(found ? "kept" : "lost")")
        }
    }

    @Test("--max-disk refuses writes past it (storage_full) and keeps reads; raised by a SIGHUP reload, writes are taken again")
    func maxDiskRefusesWrites() throws {
        let directory = try TemporaryDirectory("max-disk")
        let config = directory.appending("kvod.conf")
        try "max-disk = 400000\n".write(toFile: config, atomically: true, encoding: .utf8)
        var server = try KVODProcess(["--config", config, "--http-port", "0"], dataDirectory: directory.appending("data"))
        defer { server.stop() }
        let writer = try server.connect()
        let (acknowledged, refusal) = try Self.createUntilRefused(writer, prefix: "q")
        let refused = try #require(refusal, "--max-disk 400000 never reached")
        expectEqual(refused["error"]?["code"], "storage_full", "\(refused)")
        let message: String = refused["error"]?["message"]?.stringValue ?? ""
        #expect(message.contains("--max-disk"), "\(refused)")
        expectEqual(try writer.call("get", ["object": .string(acknowledged.last!), "keyPath": "pad"])["value"], Self.padding)
        let metrics = Self.httpBody(server, "/metrics")
        #expect(metrics.contains("kvod_storage_state 1"), "\(metrics)")
        #expect(metrics.contains("kvod_storage_max_disk_bytes 400000"), "\(metrics)")
        // `status` (issue 42) names the alarm and the store's state.
        let status = try writer.call("status")
        #expect(status["storage"]?["state"] == "full" && status["storage"]?["maxDiskBytes"] == 400000, "\(status)")
        let alarms = try #require(status["alarms"]?.arrayValue, "\(status)")
        #expect(alarms.count == 1 && alarms.first?["alarm"] == "storage_full", "\(alarms)")
        expectEqual(alarms.first?["reason"]?.stringValue?.hasPrefix("storage full: "), true, "\(alarms)")

        try "max-disk = 0\n".write(toFile: config, atomically: true, encoding: .utf8)
        server.send(signal: SIGHUP)
        #expect(try Self.waitUntilWritable(writer, object: "later"), "\(server.log)")
        let cleared = try writer.call("status")
        #expect(cleared["alarms"] == [] && cleared["storage"]?["state"] == "writable", "\(cleared)")
        let maxDisk = try #require(try writer.call("config")["settings"]?.arrayValue?.first { $0["name"] == "max-disk" })
        expectEqual(maxDisk, ["name": "max-disk", "value": "0", "source": "reload", "origin": .string("\(config) line 1")], "\(maxDisk)")
        server = try server.restart()
        let again = try server.connect()
        for id in acknowledged + ["later"] {
            expectEqual(try again.request("get", ["object": .string(id)])["ok"], true, "acknowledged '\(id)' is gone")
        }
    }

    @Test("the data directory deleted under load: kvod says so, refuses writes and keeps serving reads")
    func lostDataDirectory() throws {
        let directory = try TemporaryDirectory("lost-data")
        let data = directory.appending("data")
        let server = try KVODProcess(["--http-port", "0"], dataDirectory: data)
        defer { server.stop() }
        var index = 0
        var acknowledgedAfterDeletion = 0
        var deleted = false
        var refusal: JSONValue?
        var writer = try server.connect()
        while index < 5000 {
            let reply: JSONValue
            do {
                reply = try writer.request("create", ["object": .string("d\(index)"), "values": ["n": .int(Int64(index))]])
            } catch {
                // The commit that found the file gone was rolled back, and its connections closed with it.
                writer = try server.connect()
                reply = try writer.request("create", ["object": .string("d\(index)")])
            }
            index += 1
            if reply["ok"] != true {
                refusal = reply
                break
            }
            if deleted { acknowledgedAfterDeletion += 1 }
            if index == 200 {
                try FileManager.default.removeItem(atPath: data)
                deleted = true
            }
        }
        let refused = try #require(refusal, "writes were never refused after the data directory was deleted")
        expectEqual(refused["error"]?["code"], "storage_unavailable", "\(refused)")
        // The commit that raced the deletion may have been stored in the deleted file; nothing after it.
        #expect(acknowledgedAfterDeletion <= 1, "\(acknowledgedAfterDeletion) writes acknowledged after the deletion")
        #expect(server.waitForLog("was deleted"), "\(server.log)")
        #expect(server.log.contains("critical"), "\(server.log)")
        let reader = try server.connect()
        expectEqual(try reader.call("get", ["object": "d10", "keyPath": "n"])["value"], 10)
        #expect(Self.httpBody(server, "/readyz").contains("storage lost"))
        #expect(Self.httpBody(server, "/metrics").contains("kvod_storage_state 3"))
    }
}
