import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Expiry against the real kvod over TCP (docs/protocol.md, "Expiry"): `ttl` on create, set and in a batch,
/// the `sourceDeleted` with `"cause":"expired"` (full and compact) over the real clock, hostile values refused with
/// nothing changed, `expire` kept for the server, and deadlines that survive a SIGKILL. Refreshes by writes and
/// `touch`, and deadlines to the millisecond, are tested in-process with a manual clock (`ManualClockServerTests`).
@Suite struct ExpiryOverTCPTests {
    /// Waits up to `timeout` for the next change event on `connection`.
    private func nextChange(_ connection: KVOConnection, timeout: Double = 5) throws -> JSONValue? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            guard let event = try connection.nextEvent(timeout: max(0.05, deadline.timeIntervalSinceNow)) else { return nil }
            if event["event"] == "change" || event["s"] != nil { return event }
        }
        return nil
    }

    @Test func anObjectGoesWhenItsTimeToLiveEndsAndItsObserversAreTold() throws {
        let server = try KVODProcess()
        let writer = try server.connect()
        let observer = try server.connect()
        let compact = LineClient(try server.connect())
        try compact.call("hello", ["events": "compact"])
        let started = Date()
        // Long enough for the observations below to be made on a loaded machine.
        try writer.call("create", ["object": "sess:1", "values": ["user": "ada"], "ttl": 3])
        let sub = try observer.call("observe", ["object": "sess:1", "keyPath": "user", "options": ["new", "old"]])["sub"]
        let ids = try observer.call("observe", ["pattern": "sess:*"])["sub"]
        let compactSub = try #require(try compact.call("observe", ["object": "sess:1", "keyPath": "user"])["sub"])
        var heard: [JSONValue] = []
        while heard.count < 2, let event = try nextChange(observer, timeout: 15) { heard.append(event) }
        let took = Date().timeIntervalSince(started)
        #expect(took >= 2.9 && took < 15, "expired after \(took) s")
        expectEqual(heard.map { $0["sub"] }, [sub, ids])
        #expect(heard.allSatisfy { $0["reason"] == "sourceDeleted" && $0["cause"] == "expired" }, "\(heard)")
        expectEqual(heard.first?["change"]?["old"], "ada")
        // The same ending, compact: `w` sourceDeleted, `x` expired.
        let lines = try compact.takeEvents().map { String(decoding: $0, as: UTF8.self) }
        expectEqual(lines, [#"{"s":\#(compactSub),"r":2,"w":"s","x":1,"n":null}"#], "\(lines)")
        expectEqual(try writer.request("get", ["object": "sess:1"])["error"]?["code"], "not_found")
    }

    @Test("hostile ttl values and a client's expire are refused, nothing changes, the connection serves on")
    func hostileValuesAreRefused() throws {
        let scratch = try TemporaryDirectory("expiry-users")
        let usersFile = scratch.appending("users.json")
        try KVODUserTool.addUser("ann", password: "pw", rules: ["*=read,write"], usersFile: usersFile)
        let server = try KVODProcess(["--users", usersFile])
        let client = try server.connect()
        try client.call("auth", ["user": "ann", "password": "pw"])
        try client.call("create", ["object": "o", "values": ["n": 0]])
        let cases: [(String, [String: JSONValue], String)] = [
            ("create", ["object": "x", "ttl": -1], "bad_request"),
            ("create", ["object": "x", "ttl": 1e300], "bad_request"),
            ("create", ["object": "x", "ttl": "10"], "bad_request"),
            ("create", ["object": "x", "ttl": [1]], "bad_request"),
            ("set", ["object": "o", "keyPath": "n", "value": 1, "ttl": 400_000_000], "bad_request"),
            ("insert", ["object": "o", "keyPath": "list", "value": 1, "ttl": 5], "bad_request"),
            ("delete", ["object": "o", "ttl": 5], "bad_request"),
            ("touch", ["object": "missing"], "not_found"),
            ("touch", [:], "bad_request"),
            ("expire", ["object": "o", "changedRev": 100], "forbidden"),
            ("expire", ["object": "o"], "bad_request"),
        ]
        for (op, params, code) in cases {
            let reply = try client.request(op, params)
            expectEqual(reply["error"]?["code"], .string(code), "\(op) \(params): \(reply)")
        }
        _ = try client.call("ping")
        expectEqual(try client.call("list")["objects"], ["o"])
        expectEqual(try client.call("get", ["object": "o"])["value"], ["n": 0])
        expectEqual(try client.call("touch", ["object": "o"])["expiresAt"], .null, "no refused request gave it a ttl")
    }

    /// The real clock's wiring end to end: deadlines are on the wall clock and stored, so an object whose deadline
    /// passed while kvod was stopped is gone at the restart, before any housekeeping tick, and the other keeps its
    /// deadline. (Deadlines to the millisecond are `ManualClockServerTests`'.)
    @Test func aDeadlineSurvivesSIGKILLAndAnObjectDueMeanwhileIsGoneAtTheRestart() throws {
        let directory = try TemporaryDirectory("expiry-restart")
        let server = try KVODProcess(dataDirectory: directory.appending("data"))
        let client = try server.connect()
        try client.call("create", ["object": "soon", "values": [:], "ttl": 0.3])
        try client.call("create", ["object": "later", "values": [:], "ttl": 3600])
        // `get` says the deadline without moving it (a touch would move it, and prove nothing).
        let soon = try #require(try client.call("get", ["object": "soon"])["expiresAt"]?.intValue)
        let before = try client.call("get", ["object": "later"])["expiresAt"]?.intValue
        server.stop(signal: SIGKILL)
        // The deadline passes while kvod is stopped (the wall clock, which the deadline is on).
        let untilDue = Double(soon) / 1000 - Date().timeIntervalSince1970
        if untilDue > 0 { Thread.sleep(forTimeInterval: untilDue + 0.01) }
        let restarted = try server.restart(after: SIGKILL)
        let again = try restarted.connect()
        expectEqual(try again.request("get", ["object": "soon"])["error"]?["code"], "not_found", "expired before the first request")
        expectEqual(try again.call("list")["objects"], ["later"])
        let after = try again.call("get", ["object": "later"])["expiresAt"]?.intValue
        #expect(before != nil && after == before, "the deadline survived: \(String(describing: before)) -> \(String(describing: after))")
    }

    /// A client that was away when an object expired and resumes with `sinceRev` hears the same ending, cause
    /// and all, from history: an ordinary observation and an id-set pattern, on the running kvod and after a
    /// restart (history reloaded from the store), where a plain delete replays without a cause.
    @Test func aResumedObservationHearsThatTheObjectExpired() throws {
        let directory = try TemporaryDirectory("expiry-resume")
        let server = try KVODProcess(dataDirectory: directory.appending("data"))
        let client = try server.connect()
        try client.call("create", ["object": "sess:1", "values": ["user": "ada"], "ttl": 0.5])
        try client.call("create", ["object": "sess:2", "values": ["user": "bob"]])
        let since = try #require(try client.call("get", ["object": "sess:1"])["rev"]?.intValue)
        let deadline = Date().addingTimeInterval(15)
        while try client.call("list")["objects"] != ["sess:2"], Date() < deadline { usleep(50_000) }
        try client.call("delete", ["object": "sess:2"])

        func resumed(_ server: KVODProcess) throws -> [JSONValue] {
            let observer = try server.connect()
            let sub = try observer.call("observe", ["object": "sess:1", "keyPath": "user", "options": ["new", "old"],
                                                    "sinceRev": .int(since)])["sub"]
            let ids = try observer.call("observe", ["pattern": "sess:*", "sinceRev": .int(since)])["sub"]
            var heard: [JSONValue] = []
            while heard.count < 3, let event = try nextChange(observer, timeout: 5) { heard.append(event) }
            expectEqual(heard.map { $0["sub"] }, [sub, ids, ids], "\(heard)")
            return heard
        }
        func check(_ heard: [JSONValue], _ name: String) {
            #expect(heard.allSatisfy { $0["reason"] == "sourceDeleted" }, "\(name): \(heard)")
            expectEqual(heard.map { $0["object"] }, ["sess:1", "sess:1", "sess:2"], "\(name): \(heard)")
            expectEqual(heard.map { $0["cause"] }, ["expired", "expired", nil], "\(name): \(heard)")
            expectEqual(heard.first?["change"]?["old"], "ada", "\(name): \(heard)")
        }
        check(try resumed(server), "running")
        let restarted = try server.restart()
        check(try resumed(restarted), "restarted")
    }
}
