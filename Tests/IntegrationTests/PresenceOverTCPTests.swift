import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Presence against the real kvod over TCP (docs/protocol.md, "Presence"): sessions that outlive their
/// connection by a grace period, `onDisconnect` writes that run once when a session ends (a SIGKILLed client,
/// `endSession`, a kvod restart the client did not come back from), ephemeral objects, the registrant's rights
/// at the moment an action runs, and hostile requests refused with nothing changed.
@Suite struct PresenceOverTCPTests {

    /// Waits up to `timeout` for the first change event on `connection`.
    private func firstChange(_ connection: KVOConnection, timeout: Double = 15) throws -> JSONValue? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline, let event = try connection.nextEvent(timeout: max(0.05, deadline.timeIntervalSinceNow)) {
            if event["event"] == "change" { return event }
        }
        return nil
    }

    @Test("a SIGKILLed client's onDisconnect runs once, after its grace; its ephemeral object goes with it")
    func aKilledClientsActionRunsOnce() throws {
        let server = try KVODProcess()
        let observer = try server.connect()
        try observer.call("create", ["object": "host", "values": ["online": false]])
        let presence = try KVOClientProcess.start(server, ["presence", "host", "online", "true", "--offline", "false", "--grace", "1"])
        let line = presence.nextLine(timeout: 15)
        #expect(line?.hasPrefix("session ") == true && line?.hasSuffix("grace 1.0 s") == true, "\(String(describing: line))")
        let marker = try KVOClientProcess.start(server, ["presence", "cursor", "x", "1", "--ephemeral", "--grace", "1"])
        expectEqual(marker.nextLine(timeout: 15)?.hasPrefix("session "), true)
        expectEqual(try observer.call("get", ["object": "host", "keyPath": "online"])["value"], true)
        expectEqual(try observer.call("get", ["object": "cursor"])["value"], ["x": 1])
        try observer.call("observe", ["object": "host", "keyPath": "online", "options": ["new"]])
        try observer.call("observe", ["pattern": "cursor"])
        let killed = Date()
        presence.send(signal: SIGKILL)
        marker.send(signal: SIGKILL)
        var heard = try observer.changeEvents(within: 0.8)
        #expect(heard.isEmpty, "nothing before the grace: \(heard)")
        while heard.count < 2, let event = try firstChange(observer) { heard.append(event) }
        let took = Date().timeIntervalSince(killed)
        #expect(took >= 0.9, "the actions waited for the grace: \(took) s")
        // A further 2.5 s: nothing runs twice.
        heard += try observer.changeEvents(within: 2.5)
        let offline = heard.filter { $0["object"] == "host" }
        let deleted = heard.filter { $0["object"] == "cursor" }
        #expect(offline.count == 1 && offline.first?["change"]?["new"] == false, "\(heard)")
        #expect(deleted.count == 1 && deleted.first?["reason"] == "sourceDeleted", "\(heard)")
        expectEqual(try observer.request("get", ["object": "cursor"])["error"]?["code"], "not_found")
    }

    @Test("a session resumed within its grace runs nothing; a takeover moves it; ended, it cannot be resumed")
    func resumingAndTakingOver() throws {
        let server = try KVODProcess()
        let observer = try server.connect()
        try observer.call("create", ["object": "p", "values": ["n": 0]])
        let first = try server.connect()
        let begun = try first.call("session", ["grace": 2])
        let id = try #require(begun["session"]?.stringValue)
        #expect(begun["resumed"] == false && begun["grace"] == 2)
        expectEqual(try first.call("onDisconnect", ["request": ["op": "increment", "object": "p", "keyPath": "n"]])["action"], 1)
        first.close()
        // Detached, its action's bytes counted (`/metrics`, here through the `metrics` operation).
        let observed = Date().addingTimeInterval(10)
        var text = ""
        while Date() < observed {
            text = try observer.call("metrics")["text"]?.stringValue ?? ""
            if text.contains(#"kvod_sessions{state="detached"} 1"#) { break }
            usleep(20_000)
        }
        #expect(text.contains(#"kvod_sessions{state="attached"} 0"#) && text.contains(#"kvod_sessions{state="detached"} 1"#), "\(text)")
        #expect(text.contains("kvod_session_action_bytes 45"), "\(text)")
        let second = try server.connect()
        let resumed = try second.call("session", ["resume": .string(id)])
        #expect(resumed["resumed"] == true && resumed["actions"] == 1 && resumed["ephemeral"] == 0, "\(resumed)")
        // A third connection takes the session over while the second is still open; the second's close is then nothing.
        // (That the taken-over connection's close ends nothing, to the millisecond, is `ManualClockServerTests`'.)
        let third = try server.connect()
        expectEqual(try third.call("session", ["resume": .string(id), "grace": 0.5])["grace"], 0.5)
        second.close()
        try observer.call("observe", ["object": "p", "keyPath": "n", "options": ["new"]])
        third.close()
        let ran = try firstChange(observer)
        expectEqual(ran?["change"]?["new"], 1, "\(String(describing: ran))")
        #expect(try observer.changeEvents(within: 1.5).isEmpty, "once")
        // Ended: its actions ran, so it cannot be resumed.
        let late = try server.connect()
        expectEqual(try late.request("session", ["resume": .string(id)])["error"]?["code"], "not_found")
    }

    @Test("endSession runs the actions and deletes the ephemeral objects at once; cancelOnDisconnect drops actions")
    func endingASessionAndCancelling() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        try client.call("create", ["object": "p", "values": ["a": 0, "b": 0, "c": 0]])
        #expect(try client.request("create", ["object": "e", "ephemeral": true])["error"]?["code"] == "bad_request",
                "no session, no ephemeral object")
        try client.call("session", ["grace": 60])
        let a = try client.call("onDisconnect", ["request": ["op": "set", "object": "p", "keyPath": "a", "value": 1]])["action"]
        try client.call("onDisconnect", ["request": ["op": "batch", "ops": [
            ["op": "set", "object": "p", "keyPath": "b", "value": 2],
            ["op": "set", "object": "p", "keyPath": "c", "value": 3, "ifEquals": ["keyPath": "c", "value": 0]],
        ]]])
        try client.call("onDisconnect", ["request": ["op": "set", "object": "p", "keyPath": "a", "value": 9]])
        expectEqual(try client.call("cancelOnDisconnect", ["action": a ?? 0])["cancelled"], 1)
        expectEqual(try client.call("cancelOnDisconnect", ["action": a ?? 0])["cancelled"], 0, "cancelled twice is nothing")
        try client.call("create", ["object": "e1", "values": [:], "ephemeral": true])
        try client.call("create", ["object": "e2", "values": [:], "ephemeral": true])
        // e2 is deleted and made again by another client: no longer the session's to delete.
        let other = try server.connect()
        try other.call("delete", ["object": "e2"])
        try other.call("create", ["object": "e2", "values": ["mine": true]])
        expectEqual(try client.request("create", ["object": "e1", "values": [:], "ephemeral": true])["error"]?["code"], "exists")
        expectEqual(try client.call("endSession")["ran"], 3, "2 actions and e1's deletion")
        expectEqual(try client.call("get", ["object": "p"])["value"], ["a": 9, "b": 2, "c": 3])
        expectEqual(try client.call("list")["objects"], ["e2", "p"])
        expectEqual(try client.request("endSession")["error"]?["code"], "bad_request")
        expectEqual(try client.request("onDisconnect", ["request": ["op": "delete", "object": "p"]])["error"]?["code"], "bad_request")
        // A new session on the same connection.
        expectEqual(try client.call("session")["grace"], 10, "the default grace")
    }

    @Test("a batch that deletes and creates an ephemeral object again ends the session's hold (owner or not); a failed one does not")
    func aBatchRecreatingAnEphemeralObjectEndsTheHold() throws {
        let server = try KVODProcess()
        let owner = try server.connect()
        let other = try server.connect()
        let id = try #require(try owner.call("session", ["grace": 60])["session"]?.stringValue)
        for name in ["byOther", "byOwner", "failed"] {
            try owner.call("create", ["object": .string(name), "values": ["v": 1], "ephemeral": true])
        }
        // Another client's batch, then the owner's own: each deletes the object and creates it again.
        for (client, name) in [(other, "byOther"), (owner, "byOwner")] {
            try client.call("batch", ["ops": [["op": "delete", "object": .string(name)],
                                              ["op": "create", "object": .string(name), "values": ["v": 2]]]])
        }
        // A batch that fails after its delete puts the object back, still the session's.
        let failed = try other.request("batch", ["ops": [["op": "delete", "object": "failed"],
                                                        ["op": "set", "object": "nowhere", "keyPath": "v", "value": 1]]])
        #expect(failed["error"]?["code"] == "not_found", "\(failed)")
        // Taken over by a third connection, the session tells what it holds; ended, it deletes that only.
        let taker = try server.connect()
        #expect(try taker.call("session", ["resume": .string(id)])["ephemeral"] == 1, "'failed' only")
        #expect(try taker.call("endSession")["ran"] == 1, "one deletion: 'failed'")
        #expect(try owner.call("list")["objects"] == ["byOther", "byOwner"])
        #expect(try owner.call("get", ["object": "byOther"])["value"] == ["v": 2])
        #expect(try owner.call("get", ["object": "byOwner"])["value"] == ["v": 2])
    }

    @Test("an ephemeral object goes with its session even when its user has lost write on it since")
    func anEphemeralObjectOutlivesNoRevocation() throws {
        let scratch = try TemporaryDirectory("presence-ephemeral-rights")
        let usersFile = scratch.appending("users.json")
        try KVODUserTool.addUser("root", password: "root-pw", rules: ["*=read,write,admin"], usersFile: usersFile)
        try KVODUserTool.addUser("ann", password: "pw", rules: ["*=read,write"], usersFile: usersFile)
        let server = try KVODProcess(["--users", usersFile])
        let root = try server.connect()
        try root.call("auth", ["user": "root", "password": "root-pw"])
        let ann = try server.connect()
        try ann.call("auth", ["user": "ann", "password": "pw"])
        try ann.call("session", ["grace": 0.2])
        try ann.call("onDisconnect", ["request": ["op": "set", "object": "status", "keyPath": "online", "value": false]])
        try ann.call("create", ["object": "cursors.ann", "values": ["x": 1], "ephemeral": true])
        try root.call("create", ["object": "status", "values": ["online": true]])
        try root.call("observe", ["pattern": "cursors.*"])
        // Ann loses write everywhere: her action is refused when it runs; her ephemeral object still goes.
        try root.call("userRevoke", ["user": "ann", "rules": [["objects": "*", "allow": ["write"]]]])
        ann.close()
        let deleted = try firstChange(root)
        #expect(deleted?["object"] == "cursors.ann" && deleted?["reason"] == "sourceDeleted", "\(String(describing: deleted))")
        #expect(try root.request("get", ["object": "cursors.ann"])["error"]?["code"] == "not_found")
        #expect(try root.call("get", ["object": "status", "keyPath": "online"])["value"] == true, "the action was refused")
    }

    @Test("a restart runs the pending actions of the clients that did not come back, and not of one that resumed")
    func aRestartRunsWhatWasPending() throws {
        let directory = try TemporaryDirectory("presence-restart")
        let server = try KVODProcess(dataDirectory: directory.appending("data"))
        let setup = try server.connect()
        try setup.call("create", ["object": "gone", "values": ["online": true]])
        try setup.call("create", ["object": "back", "values": ["online": true]])
        let leaving = try server.connect()
        try leaving.call("session", ["grace": 1])
        try leaving.call("onDisconnect", ["request": ["op": "set", "object": "gone", "keyPath": "online", "value": false]])
        try leaving.call("create", ["object": "gone.cursor", "values": [:], "ephemeral": true])
        let returning = try server.connect()
        let id = try #require(try returning.call("session", ["grace": 60])["session"]?.stringValue)
        try returning.call("onDisconnect", ["request": ["op": "set", "object": "back", "keyPath": "online", "value": false]])
        server.stop(signal: SIGKILL)
        let restarted = try server.restart(after: SIGKILL)
        let again = try restarted.connect()
        let resumed = try again.call("session", ["resume": .string(id)])
        #expect(resumed["resumed"] == true && resumed["actions"] == 1, "\(resumed)")
        let deadline = Date().addingTimeInterval(15)
        while try again.call("get", ["object": "gone", "keyPath": "online"])["value"] != false, Date() < deadline { usleep(50_000) }
        expectEqual(try again.call("get", ["object": "gone", "keyPath": "online"])["value"], false, "ran after the restart")
        expectEqual(try again.request("get", ["object": "gone.cursor"])["error"]?["code"], "not_found")
        expectEqual(try again.call("get", ["object": "back", "keyPath": "online"])["value"], true, "resumed: nothing ran")
        // Ended and stored as ended: a second restart runs nothing again.
        try again.call("set", ["object": "gone", "keyPath": "online", "value": "again"])
        again.close()
        let third = try restarted.restart(after: SIGTERM)
        let check = try third.connect()
        // The start-up says which sessions it restored: only the resumed one (its client left again), not the
        // ended one, whose actions could then not run; no need to wait out its 1 s grace.
        #expect(third.waitForLog("restored 1 session, each ending after its grace"), "\(third.log.suffix(2000))")
        #expect(!third.log.contains("restored 2 sessions"), "\(third.log.suffix(2000))")
        expectEqual(try check.call("get", ["object": "gone", "keyPath": "online"])["value"], "again")
    }

    @Test("sessions that all end at once after a restart run every action, over several ticks (2,000 writes each)")
    func manySessionsEndingAtOnce() throws {
        let directory = try TemporaryDirectory("presence-many")
        let server = try KVODProcess(dataDirectory: directory.appending("data"))
        let setup = try server.connect()
        try setup.call("create", ["object": "counter", "values": ["n": 0]])
        var clients: [KVOConnection] = []
        for _ in 0..<40 {
            let client = try server.connect()
            try client.call("session", ["grace": 1])
            for _ in 0..<SessionLimitsForTests.actionsPerSession {
                try client.call("onDisconnect", ["request": ["op": "increment", "object": "counter", "keyPath": "n"]])
            }
            clients.append(client)
        }
        server.stop(signal: SIGKILL)
        let restarted = try server.restart(after: SIGKILL)
        let check = try restarted.connect()
        let expected = Int64(40 * SessionLimitsForTests.actionsPerSession)
        let deadline = Date().addingTimeInterval(30)
        while try check.call("get", ["object": "counter", "keyPath": "n"])["value"] != .int(expected), Date() < deadline {
            usleep(100_000)
        }
        expectEqual(try check.call("get", ["object": "counter", "keyPath": "n"])["value"], .int(expected), "every action ran once")
        let metrics = try check.call("metrics")["text"]?.stringValue ?? ""
        #expect(metrics.contains(#"kvod_sessions{state="detached"} 0"#) && metrics.contains("kvod_session_action_bytes 0"), "\(metrics)")
    }

    @Test("an action runs with its registrant's rights as they are when it runs; another user cannot resume the session")
    func actionsRunWithTheRightsOfTheirMoment() throws {
        let scratch = try TemporaryDirectory("presence-users")
        let usersFile = scratch.appending("users.json")
        try KVODUserTool.addUser("root", password: "root-pw", rules: ["*=read,write,admin"], usersFile: usersFile)
        try KVODUserTool.addUser("ann", password: "pw", rules: ["*=read,write"], usersFile: usersFile)
        try KVODUserTool.addUser("bob", password: "pw", rules: ["*=read,write"], usersFile: usersFile)
        let server = try KVODProcess(["--users", usersFile])
        let root = try server.connect()
        try root.call("auth", ["user": "root", "password": "root-pw"])
        try root.call("create", ["object": "shared", "values": ["n": 0]])
        try root.call("create", ["object": "ann.status", "values": ["online": true]])
        let ann = try server.connect()
        try ann.call("auth", ["user": "ann", "password": "pw"])
        let id = try #require(try ann.call("session", ["grace": 0.5])["session"]?.stringValue)
        try ann.call("onDisconnect", ["request": ["op": "set", "object": "shared", "keyPath": "n", "value": 1]])
        try ann.call("onDisconnect", ["request": ["op": "set", "object": "ann.status", "keyPath": "online", "value": false]])
        let bob = try server.connect()
        try bob.call("auth", ["user": "bob", "password": "pw"])
        expectEqual(try bob.request("session", ["resume": .string(id)])["error"]?["code"], "not_found", "ann's session is not bob's")
        // Ann loses write on `shared` before her session ends.
        try root.call("userRevoke", ["user": "ann", "rules": [["objects": "*", "allow": ["write"]]]])
        try root.call("userGrant", ["user": "ann", "rules": [["objects": "ann.*", "allow": ["write"]]]])
        ann.close()
        let deadline = Date().addingTimeInterval(15)
        while try root.call("get", ["object": "ann.status", "keyPath": "online"])["value"] != false, Date() < deadline { usleep(50_000) }
        expectEqual(try root.call("get", ["object": "ann.status", "keyPath": "online"])["value"], false)
        expectEqual(try root.call("get", ["object": "shared", "keyPath": "n"])["value"], 0, "refused: ann may no longer write it")
    }

    @Test("hostile presence requests are refused with clear errors, nothing changes, and the connection serves on")
    func hostileRequestsAreRefused() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        try client.call("create", ["object": "o", "values": ["n": 0]])
        let beforeSession: [(String, [String: JSONValue], String)] = [
            ("onDisconnect", ["request": ["op": "set", "object": "o", "keyPath": "n", "value": 1]], "bad_request"),
            ("cancelOnDisconnect", [:], "bad_request"),
            ("endSession", [:], "bad_request"),
            ("session", ["grace": -1], "bad_request"),
            ("session", ["grace": 301], "bad_request"),
            ("session", ["grace": "10"], "bad_request"),
            ("session", ["resume": "x"], "bad_request"),
            ("session", ["resume": .string(String(repeating: "a", count: 32))], "not_found"),
            ("session", ["resume": 5], "bad_request"),
            ("create", ["object": "e", "ephemeral": true], "bad_request"),
            ("set", ["object": "o", "keyPath": "n", "value": 1, "ephemeral": true], "bad_request"),
            ("batch", ["ops": [["op": "create", "object": "e", "ephemeral": true]]], "bad_request"),
        ]
        for (op, params, code) in beforeSession {
            expectEqual(try client.request(op, params)["error"]?["code"], .string(code), "\(op) \(params)")
        }
        try client.call("session", ["grace": 300])
        expectEqual(try client.request("session")["error"]?["code"], "bad_request", "one session per connection")
        let huge = String(repeating: "x", count: 20_000)
        let refusedActions: [(JSONValue, String)] = [
            ("set", "bad_request"),
            (["op": "get", "object": "o"], "bad_request"),
            (["op": "observe", "object": "o", "keyPath": "n"], "bad_request"),
            (["op": "expire", "object": "o", "changedRev": 1], "bad_request"),
            (["op": "bind", "from": ["object": "o", "keyPath": "n"], "to": ["object": "o", "keyPath": "m"]], "bad_request"),
            (["op": "userAdd", "user": "x", "password": "y"], "bad_request"),
            (["op": "session"], "bad_request"),
            (["op": "onDisconnect", "request": ["op": "delete", "object": "o"]], "bad_request"),
            (["op": "create", "object": "z", "ephemeral": true], "bad_request"),
            (["op": "set", "object": "o", "keyPath": "n", "value": 1, "id": 7], "bad_request"),
            (["op": "set", "object": "o"], "bad_request"),
            (["op": "nope"], "unknown_op"),
            (["op": "set", "object": "o", "keyPath": "n", "value": .string(huge)], "too_large"),
        ]
        for (request, code) in refusedActions {
            expectEqual(try client.request("onDisconnect", ["request": request])["error"]?["code"], .string(code), "\(request)")
        }
        expectEqual(try client.request("onDisconnect")["error"]?["code"], "bad_request")
        expectEqual(try client.request("cancelOnDisconnect", ["action": -1])["error"]?["code"], "bad_request")
        // The limit of 64 actions per session: the 65th is too_large, with the limit.
        for index in 1...64 {
            #expect(try client.call("onDisconnect", ["request": ["op": "increment", "object": "o", "keyPath": "n"]])["action"]
                    == .int(Int64(index)))
        }
        let sixtyFifth = try client.request("onDisconnect", ["request": ["op": "increment", "object": "o", "keyPath": "n"]])
        #expect(sixtyFifth["error"]?["code"] == "too_large" && sixtyFifth["error"]?["limit"] == 64, "\(sixtyFifth)")
        expectEqual(try client.call("get", ["object": "o"])["value"], ["n": 0], "nothing ran or changed")
        expectEqual(try client.call("endSession")["ran"], 64)
        expectEqual(try client.call("get", ["object": "o", "keyPath": "n"])["value"], 64)
        _ = try client.call("ping")
    }
}

/// The per-session action limit of `SessionLimits` (64), as the protocol documents it.
enum SessionLimitsForTests {
    static let actionsPerSession = 64
}
