import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Bounds across all connections, against the real kvod over TCP with small flag values (issue 10,
/// item 7): the total output cap closes the slowest consumers largest first, the total input cap closes
/// the connection holding the largest unfinished line, memory goes back to the system after a burst,
/// and a connection that sends no request is closed after the first-request timeout.
@Suite struct GlobalBoundsOverTCPTests {
    /// Reads until the server closes the connection (true) or `timeout` seconds pass quietly (false).
    private func closedByServer(_ connection: KVOConnection, timeout: Double = 10) -> Bool {
        while true {
            let result = Result { () throws(KVOClientError) -> JSONValue in try connection.readMessage(timeout: timeout) }
            switch result {
            case .success: continue
            case let .failure(error): return error == .connectionClosed
            }
        }
    }

    /// kvod's resident set size in bytes (VmRSS from /proc).
    private func residentBytes(_ server: KVODProcess) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(server.process.processIdentifier)/status", encoding: .utf8)
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") })
        let kilobytes = try #require(Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]))
        return kilobytes * 1024
    }

    @Test func theTotalOutputCapClosesTheLargestSlowConsumersAndOthersAreServed() throws {
        // Per connection 256 MiB (never reached), all together 24 MiB.
        let server = try KVODProcess(["--max-output-buffer", "268435456", "--max-total-output", "25165824", "--history", "0"])
        let writer = try server.connect()
        try writer.call("create", ["object": "hot", "values": ["big": "", "small": 0]])
        // Three subscribers to large events and three to small ones, none of which ever reads again,
        // and a healthy subscriber to the large events that reads everything.
        var heavy: [KVOConnection] = []
        var light: [KVOConnection] = []
        for _ in 0..<3 {
            let connection = try server.connect()
            try connection.call("observe", ["object": "hot", "keyPath": "big"])
            heavy.append(connection)
        }
        for _ in 0..<3 {
            let connection = try server.connect()
            try connection.call("observe", ["object": "hot", "keyPath": "small"])
            light.append(connection)
        }
        let healthy = try server.connect()
        try healthy.call("observe", ["object": "hot", "keyPath": "big"])

        // 400 events of 64 KB: 25 MB to each heavy subscriber, more than the kernel's socket buffers
        // absorb, so together they pass the 24 MiB cap.
        let padding = String(repeating: "b", count: 64 * 1024)
        for index in 1...400 {
            try writer.call("set", ["object": "hot", "keyPath": "big", "value": .string("\(index)\(padding)")])
            try writer.call("set", ["object": "hot", "keyPath": "small", "value": .int(Int64(index))])
            let event = try #require(try healthy.nextEvent(timeout: 10), "event \(index)")
            expectEqual(event["change"]?["new"], .string("\(index)\(padding)"))
        }
        #expect(server.waitForLog("total output buffer limit exceeded"), "\(server.log.suffix(2000))")
        // The heavy subscribers were closed (at least the largest), the light ones and the healthy one were not.
        let observers = try writer.call("info", ["object": "hot"])["observers"]?.arrayValue ?? []
        let keyPaths = observers.compactMap { $0["keyPath"]?.stringValue }
        expectEqual(keyPaths.filter { $0 == "small" }.count, 3, "\(keyPaths)")
        #expect(keyPaths.filter { $0 == "big" }.count < 4, "\(keyPaths)")
        #expect(closedByServer(heavy[0]) || closedByServer(heavy[1]) || closedByServer(heavy[2]))
        for connection in light {
            try connection.call("ping")  // every small event queued so far, then the reply
        }
        try writer.call("set", ["object": "hot", "keyPath": "small", "value": -1])
        for connection in light {
            var last: JSONValue?
            while let event = try connection.nextEvent(timeout: 5) {
                last = event["change"]?["new"]
                if last == -1 { break }
            }
            expectEqual(last, -1)
        }
        try writer.call("set", ["object": "hot", "keyPath": "big", "value": "after"])
        expectEqual(try healthy.nextEvent(timeout: 5)?["change"]?["new"], "after")
    }

    @Test func theTotalInputCapClosesTheLargestUnfinishedLineAndOthersAreServed() throws {
        let server = try KVODProcess(["--max-total-input", "4194304"])
        let bystander = try server.connect()
        try bystander.call("create", ["object": "calm", "values": ["v": 0]])
        // Seven connections each send 500 KB of a line without its newline (3.5 MB, under the 4 MiB cap),
        // then an eighth sends 950 KB: the total passes the cap while its line is the largest.
        var flooders: [KVOConnection] = []
        for _ in 0..<7 {
            let connection = try server.connect()
            try connection.send(raw: Array(repeating: UInt8(ascii: "x"), count: 500 * 1024))
            flooders.append(connection)
        }
        try bystander.call("ping")
        let largest = try server.connect()
        try largest.send(raw: Array(repeating: UInt8(ascii: "y"), count: 950 * 1024))
        #expect(server.waitForLog("total input buffer limit exceeded"), "\(server.log.suffix(2000))")
        #expect(closedByServer(largest))
        // The others still hold their lines, and are served once they end them.
        for connection in flooders {
            try connection.send(raw: [0x0A])
            let reply = try connection.readMessage(timeout: 10)
            expectEqual(reply["error"]?["code"], "bad_request", "\(reply)")
            try connection.call("ping")
        }
        try bystander.call("set", ["object": "calm", "keyPath": "v", "value": 1])
        expectEqual(try bystander.call("get", ["object": "calm", "keyPath": "v"])["value"], 1)
    }

    @Test func memoryGoesBackAfterSlowSubscribersDisconnect() throws {
        let server = try KVODProcess(["--max-output-buffer", "268435456", "--history", "0"])
        let writer = try server.connect()
        try writer.call("create", ["object": "hot", "values": ["big": ""]])
        var sluggards: [KVOConnection] = []
        for _ in 0..<10 {
            let connection = try server.connect()
            try connection.call("observe", ["object": "hot", "keyPath": "big"])
            sluggards.append(connection)
        }
        let baseline = try residentBytes(server)
        // 300 events of 64 KB to ten subscribers that never read: about 190 MB queued, less what the
        // kernel's socket buffers take.
        let padding = String(repeating: "m", count: 64 * 1024)
        for index in 1...300 {
            try writer.call("set", ["object": "hot", "keyPath": "big", "value": .string("\(index)\(padding)")])
        }
        let peak = try residentBytes(server)
        #expect(peak - baseline > 80 << 20, "the burst was buffered: baseline \(baseline >> 20) MiB, peak \(peak >> 20) MiB")
        for connection in sluggards { connection.close() }
        // Within a generous 10 s the resident size falls back near the baseline (the chunk pool keeps
        // at most 16.5 MiB of free chunks).
        let deadline = Date().addingTimeInterval(10)
        var after = try residentBytes(server)
        while after - baseline > 40 << 20, Date() < deadline {
            usleep(50_000)
            after = try residentBytes(server)
        }
        #expect(after - baseline <= 40 << 20,
                "baseline \(baseline >> 20) MiB, peak \(peak >> 20) MiB, after disconnecting \(after >> 20) MiB")
        try writer.call("ping")
    }

    @Test func aConnectionWithoutARequestIsClosedAfterTheTimeoutAndAnActiveOneStays() throws {
        let server = try KVODProcess(["--first-request-timeout", "1"])
        let active = try server.connect()
        try active.call("ping")
        let idle = try server.connect()
        let partial = try server.connect()
        try partial.send(raw: Array(#"{"op":"pi"#.utf8))  // never finished
        let started = Date()
        #expect(closedByServer(idle))
        #expect(closedByServer(partial))
        let elapsed = Date().timeIntervalSince(started)
        #expect(elapsed >= 0.5 && elapsed < 8, "closed after \(elapsed) s")
        #expect(server.waitForLog("no complete request within 1.0 s"), "\(server.log)")
        // The active connection stays: its deadline (it connected first) has passed too.
        expectEqual(try active.call("ping")["ok"], true)
    }

    /// Idle connections closed by the first-request timeout are logged at most once a second, the
    /// rest counted in one line: a client opening many connections cannot flood the log.
    @Test func firstRequestTimeoutsAreLoggedAtMostOnceASecondWithACount() throws {
        let server = try KVODProcess(["--first-request-timeout", "0.5"])
        defer { server.stop() }
        let connections = try (0..<200).map { _ in try server.connect() }
        for connection in connections { #expect(closedByServer(connection)) }
        #expect(server.waitForLog("more connections closed (no complete request"), "\(server.log.suffix(2000))")
        // The lines logged one by one and those counted, until they account for all 200 (a count line may
        // come a second after another, on the housekeeping tick).
        func tally() -> (logged: Int, counted: Int) {
            let lines = server.log.split(separator: "\n")
            let logged = lines.filter { $0.contains("no complete request within 0.5 s") }.count
            let counted = lines.filter { $0.contains("(no complete request within the first-request timeout)") }
                .compactMap { line -> Int? in
                    guard let end = line.range(of: " more connection")?.lowerBound else { return nil }
                    return Int(line[..<end].reversed().prefix { $0.isNumber }.reversed().map(String.init).joined())
                }
                .reduce(0, +)
            return (logged, counted)
        }
        let deadline = Date().addingTimeInterval(10)
        var (logged, counted) = tally()
        while logged + counted < 200, Date() < deadline {
            usleep(20_000)
            (logged, counted) = tally()
        }
        #expect(logged >= 1 && logged <= 10, "\(logged) lines for 200 closings")
        expectEqual(logged + counted, 200, "logged \(logged), counted \(counted)")
    }
}
