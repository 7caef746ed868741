import Foundation
import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// The slow-request log (`SlowLog`, the `slow` operation) in-process with a manual clock: a request is made to "take"
/// a chosen time by turning the clock at each of its reads (`ServerClock.advancePerRead`), so each threshold is checked
/// to the nanosecond on either side without a sleep. Over TCP and through kvoclient: `SlowAndClientsOverTCPTests`.
@Suite struct SlowRequestLogTests {
    private static let millisecond: UInt64 = 1_000_000

    /// `line`, sent while every read of the clock turns it by `perRead` (a request reads it twice: when its handling
    /// begins and when its reply is queued, so it takes `perRead`); its reply.
    @discardableResult
    private func send(_ line: String, on client: EmbeddedConnection, clock: ServerClock, perRead: UInt64) throws -> JSONValue {
        clock.advancePerRead = perRead
        defer { clock.advancePerRead = 0 }
        return try client.call(line)
    }

    @Test("a request that takes 50 ms is kept with its operation, object, key path, connection, user and time, never its value")
    func slowRequestKeptWithoutItsValue() throws {
        let clock = ServerClock.manual()
        let server = try EmbeddedServer.make(clock: clock)
        let client = server.makeEmbeddedConnection()
        let admin = server.makeEmbeddedConnection()
        try client.call(#"{"op":"create","object":"vault","values":{"pin":"0"}}"#)
        expectEqual(try admin.call(#"{"op":"slow"}"#)["requests"], [], "a request that took no time is not kept")
        let before = clock.wallMilliseconds
        let reply = try send(#"{"op":"set","object":"vault","keyPath":"pin","value":"4711-secret"}"#, on: client, clock: clock,
                             perRead: 50 * Self.millisecond)
        expectEqual(reply["ok"], true)
        let log = try admin.call(#"{"op":"slow"}"#)
        expectEqual(log["thresholdMicros"], 10_000)
        let requests = try #require(log["requests"]?.arrayValue)
        try #require(requests.count == 1, "\(log)")
        let entry = requests[0]
        #expect(entry["op"] == "set" && entry["object"] == "vault" && entry["keyPath"] == "pin", "\(entry)")
        expectEqual(entry["micros"], 50_000, "exactly the 50 ms the clock moved between the request's two reads: \(entry)")
        #expect(entry["connection"] == .int(Int64(client.connection.id.rawValue)) && entry["user"] == .null)
        #expect((entry["at"]?.intValue ?? 0) >= before + 50)
        #expect(!JSONValue.object(log.objectValue ?? [:]).description.contains("4711"), "no value is kept: \(log)")
        expectEqual(server.metrics.slowRequests[MetricsOperation.set.rawValue], 1)
        #expect(String(decoding: server.renderMetrics(), as: UTF8.self).contains(#"kvod_slow_requests_total{op="set"} 1"#))
        #expect(server.stopEmbedded().loopClosedCleanly)
    }

    @Test("the threshold: a request 1 ns under --slow-request is not kept, one that takes it exactly is; a reload changes it")
    func thresholdToTheNanosecond() throws {
        let clock = ServerClock.manual()
        let server = try EmbeddedServer.make(clock: clock) { $0.slowRequestMilliseconds = 2.5 }
        let client = server.makeEmbeddedConnection()
        let admin = server.makeEmbeddedConnection()
        try send(#"{"op":"ping"}"#, on: client, clock: clock, perRead: 2_500_000 - 1)
        expectEqual(try admin.call(#"{"op":"slow"}"#)["requests"], [])
        try send(#"{"op":"ping"}"#, on: client, clock: clock, perRead: 2_500_000)
        expectEqual(try admin.call(#"{"op":"slow"}"#)["requests"]?.arrayValue?.map { $0["micros"] }, [2_500])
        // SIGHUP's path: the live setting applied (`Server.applyLiveSettings`); 0 keeps every request.
        var fresh = server.configuration
        fresh.slowRequestMilliseconds = 0
        server.applyLiveSettings(from: fresh)
        try client.call(#"{"op":"get","object":"missing"}"#)
        let log = try admin.call(#"{"op":"slow","reset":true}"#)
        expectEqual(log["thresholdMicros"], 0)
        expectEqual(log["requests"]?.arrayValue?.first?["op"], "get", "a request that took no time is kept at 0: \(log)")
        expectEqual(log["requests"]?.arrayValue?.first?["object"], "missing")
        // `reset` answered with the log, then emptied it: only what came since (this very request) is there now.
        let after = try admin.call(#"{"op":"slow"}"#)["requests"]?.arrayValue ?? []
        expectEqual(after.map { $0["op"] }, ["slow"], "\(after)")
        #expect(server.stopEmbedded().loopClosedCleanly)
    }

    @Test("a loop iteration that works 75 ms is a stall, with what ran in it; time the loop waits is no stall")
    func stallsWithWhatRan() throws {
        let clock = ServerClock.manual()
        let server = try EmbeddedServer.make(clock: clock)
        let writer = server.makeEmbeddedConnection()
        let observer = server.makeEmbeddedConnection()
        let admin = server.makeEmbeddedConnection()
        try writer.call(#"{"op":"create","object":"o","values":{"n":0}}"#)
        try observer.call(#"{"op":"observe","object":"o","keyPath":"n"}"#)
        // Waiting is not working: five seconds of the clock turned between iterations, then idle iterations.
        server.advanceTime(by: 5)
        server.step()
        expectEqual(try admin.call(#"{"op":"slow"}"#)["stalls"], [])
        // One set in one iteration, each of its three reads (begun, answered, the iteration's end) 25 ms: 75 ms of work.
        clock.advancePerRead = 25 * Self.millisecond
        writer.send(line: #"{"op":"set","object":"o","keyPath":"n","value":1}"#)
        server.step()
        clock.advancePerRead = 0
        expectEqual(writer.takeLines().count, 1)
        _ = observer.takeLines()
        let stalls = try #require(try admin.call(#"{"op":"slow"}"#)["stalls"]?.arrayValue)
        try #require(stalls.count == 1, "\(stalls)")
        #expect(stalls[0]["micros"] == 75_000 && stalls[0]["requests"] == 1 && stalls[0]["events"] == 1, "\(stalls[0])")
        #expect(stalls[0]["commits"] == 0 && stalls[0]["housekeeping"] == false && stalls[0]["clusterEntries"] == 0)
        expectEqual(server.metrics.loopStalls, 1)
        expectEqual(try admin.call(#"{"op":"slow"}"#)["requests"]?.arrayValue?.map { $0["op"] }, ["set"])
        #expect(server.stopEmbedded().loopClosedCleanly)
    }

    @Test("the ring keeps the last 128 of each, newest first")
    func boundedNewestFirst() throws {
        var ring = BoundedRing<Int>(capacity: 128)
        for value in 1...300 { ring.append(value) }
        #expect(ring.count == 128 && ring.appended == 300)
        expectEqual(ring.newestFirst, Array((173...300).reversed()))
        ring.removeAll()
        ring.append(1)
        ring.append(2)
        expectEqual(ring.newestFirst, [2, 1])
        let clock = ServerClock.manual()
        let server = try EmbeddedServer.make(clock: clock) { $0.slowRequestMilliseconds = 0 }
        let client = server.makeEmbeddedConnection()
        for index in 0..<200 { try client.call(#"{"op":"get","object":"o\#(index)"}"#) }
        let requests = try #require(try client.call(#"{"op":"slow"}"#)["requests"]?.arrayValue)
        expectEqual(requests.count, SlowLog.capacity)
        #expect(requests.first?["object"] == "o199" && requests.last?["object"] == "o72", "\(requests.first!) … \(requests.last!)")
        #expect(server.stopEmbedded().loopClosedCleanly)
    }
}
