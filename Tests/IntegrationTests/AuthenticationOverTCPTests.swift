import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Logging in, against the real kvod over TCP: with users defined (`--users FILE`), nothing but
/// hello, auth and ping is answered before a successful auth; wrong credentials read the same
/// whether the user exists or not; five failures close the connection; requests sent behind an
/// auth wait for its answer; without users on loopback nothing changes (open mode), and kvod refuses
/// to start on a non-loopback address without users unless --insecure-open.
@Suite("Authentication over TCP")
struct AuthenticationOverTCPTests {
    private func errorCode(_ reply: JSONValue) -> String? { reply["error"]?["code"]?.stringValue }

    /// A kvod with one user, alice (password "correct horse"), allowed everything.
    private func serverWithAlice(_ extra: [String] = []) throws -> (KVODProcess, TemporaryDirectory) {
        let scratch = try TemporaryDirectory("auth")
        let usersFile = scratch.appending("users.json")
        try KVODUserTool.addUser("alice", password: "correct horse", usersFile: usersFile)
        return (try KVODProcess(["--users", usersFile] + extra), scratch)
    }

    /// Every op but hello, auth and ping, each well-formed.
    private static let gatedRequests: [(String, [String: JSONValue])] = [
        ("create", ["object": "o"]), ("delete", ["object": "o"]), ("get", ["object": "o"]),
        ("set", ["object": "o", "keyPath": "a", "value": 1]), ("insert", ["object": "o", "keyPath": "a", "value": 1]),
        ("remove", ["object": "o", "keyPath": "a", "index": 0]),
        ("replace", ["object": "o", "keyPath": "a", "index": 0, "value": 1]),
        ("observe", ["object": "o", "keyPath": "a"]), ("unobserve", ["sub": 1]), ("list", [:]), ("info", ["object": "o"]),
        ("defineClass", ["class": ["name": "C", "properties": ["a": "string"]]]), ("classes", [:]),
        ("bind", ["from": ["object": "o", "keyPath": "a"], "to": ["object": "p", "keyPath": "b"]]),
        ("combineLatest", ["sources": [["object": "o", "keyPath": "a"]], "to": ["object": "p", "keyPath": "b"], "reduce": "$0"]),
        ("unbind", ["binding": 1]), ("bindings", [:]),
    ]

    @Test("before auth only hello, auth and ping are answered; after it, everything")
    func gatingAndSuccess() throws {
        let (server, _) = try serverWithAlice()
        let client = try server.connect()
        expectEqual(try client.call("hello")["server"], "kvod")
        try client.call("ping")
        for (op, params) in Self.gatedRequests {
            let reply = try client.request(op, params)
            expectEqual(errorCode(reply), "unauthenticated", "\(op): \(reply)")
        }
        expectEqual(errorCode(try client.request("auth", ["user": "alice", "password": "wrong"])), "unauthenticated")
        expectEqual(errorCode(try client.request("list")), "unauthenticated")
        let reply = try client.call("auth", ["user": "alice", "password": "correct horse"])
        expectEqual(reply["user"], "alice")
        expectEqual(try client.call("create", ["object": "o"])["rev"], 1)
        expectEqual(try client.call("list")["objects"], ["o"])
        // Nothing was created or changed by the refused requests before.
        expectEqual(try client.call("get", ["object": "o"])["value"], [:])
    }

    @Test("a wrong password and an unknown user get the same reply")
    func sameReplyForUnknownUser() throws {
        let (server, _) = try serverWithAlice()
        let client = try server.connect()
        var wrongPassword = try client.request("auth", ["user": "alice", "password": "nope"]).objectValue!
        var unknownUser = try client.request("auth", ["user": "mallory", "password": "nope"]).objectValue!
        wrongPassword["id"] = nil
        unknownUser["id"] = nil
        // The attempts left count down with the connection's failures, whatever was wrong; the rest is equal.
        #expect(JSONValue.object(wrongPassword)["error"]?["attemptsLeft"] == 4 && JSONValue.object(unknownUser)["error"]?["attemptsLeft"] == 3)
        wrongPassword["error"] = JSONValue.object((wrongPassword["error"]?.objectValue ?? [:]).filter { $0.key != "attemptsLeft" })
        unknownUser["error"] = JSONValue.object((unknownUser["error"]?.objectValue ?? [:]).filter { $0.key != "attemptsLeft" })
        expectEqual(wrongPassword, unknownUser)
        expectEqual(JSONValue.object(wrongPassword)["error"]?["code"], "unauthenticated")
        expectEqual(errorCode(try client.request("auth", ["token": "kvod-nothing"])), "unauthenticated")
    }

    @Test("five failed logins close the connection, logged with the peer address; others are unaffected")
    func closedAfterFiveFailures() throws {
        let (server, _) = try serverWithAlice()
        let bystander = try server.connect()
        try bystander.call("auth", ["user": "alice", "password": "correct horse"])
        let client = try server.connect()
        for attempt in 1...4 {
            let reply = try client.request("auth", ["user": "alice", "password": .string("guess\(attempt)")])
            #expect(errorCode(reply) == "unauthenticated" && reply["error"]?["attemptsLeft"] == .int(Int64(5 - attempt)), "\(reply)")
        }
        try client.call("ping")  // still open after four
        let last = try client.request("auth", ["user": "alice", "password": "guess5"])
        #expect(errorCode(last) == "unauthenticated" && last["error"]?["attemptsLeft"] == 0, "the last reply says none are left: \(last)")
        #expect(throws: KVOClientError.self) { _ = try client.readLine(timeout: 5) }  // closed
        #expect(server.waitForLog("authentication failed for user 'alice' from 127.0.0.1:"), "\(server.log)")
        #expect(server.waitForLog("5 failed authentication attempts"), "\(server.log)")
        try bystander.call("create", ["object": "still-served"])
    }

    @Test("requests sent right behind an auth wait for its answer and are answered in order")
    func pipelinedRequestsWaitForTheCheck() throws {
        let (server, _) = try serverWithAlice()
        let client = try server.connect()
        // One write: a wrong login, a create, the right login, a create, a get.
        let lines = [
            #"{"op":"auth","id":1,"user":"alice","password":"wrong"}"#,
            #"{"op":"create","id":2,"object":"early"}"#,
            #"{"op":"auth","id":3,"user":"alice","password":"correct horse"}"#,
            #"{"op":"create","id":4,"object":"late"}"#,
            #"{"op":"get","id":5,"object":"late"}"#,
        ]
        try client.send(raw: Array((lines.joined(separator: "\n") + "\n").utf8))
        var replies: [JSONValue] = []
        for _ in 1...5 { replies.append(try client.readMessage()) }
        expectEqual(replies.map { $0["id"] }, [1, 2, 3, 4, 5])
        expectEqual(errorCode(replies[0]), "unauthenticated")
        expectEqual(errorCode(replies[1]), "unauthenticated")
        expectEqual(replies[2]["user"], "alice")
        expectEqual(replies[3]["ok"], true)
        expectEqual(replies[4]["value"], [:])
        expectEqual(try client.call("list")["objects"], ["late"])
    }

    @Test("no users on loopback: open mode, as before")
    func openModeUnchanged() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        expectEqual(try client.call("create", ["object": "o"])["rev"], 1)
        expectEqual(try client.call("list")["objects"], ["o"])
        #expect(!server.log.contains("authentication required"))
    }

    @Test("kvod refuses a non-loopback address without users, in one line, and starts with --insecure-open or users")
    func protectedMode() throws {
        let error = #expect(throws: KVODProcessError.self) { _ = try KVODProcess(["--host", "0.0.0.0"]) }
        if case let .exitedEarly(status, log)? = error {
            expectEqual(status, 1)
            #expect(log.contains("refusing to serve 0.0.0.0:"), "\(log)")
            #expect(log.contains("--insecure-open"), "\(log)")
            expectEqual(log.split(separator: "\n").count, 1, "\(log)")
        } else {
            Issue.record("unexpected \(String(describing: error))")
        }
        let open = try KVODProcess(["--host", "0.0.0.0", "--insecure-open"])
        try open.connect().call("create", ["object": "o"])
        let (protected, _) = try serverWithAlice(["--host", "0.0.0.0"])
        let client = try protected.connect()
        expectEqual(errorCode(try client.request("list")), "unauthenticated")
        try client.call("auth", ["user": "alice", "password": "correct horse"])
        try client.call("list")
    }

    @Test("a connection that does not log in within --login-timeout is closed; a logged-in one stays")
    func loginTimeout() throws {
        let (server, scratch) = try serverWithAlice(["--login-timeout", "1"])
        defer { withExtendedLifetime(scratch) {} }
        let idler = try server.connect()
        #expect(try idler.call("ping")["ok"] == true)  // a request, but no login
        let member = try server.connect()
        try member.call("auth", ["user": "alice", "password": "correct horse"])
        // Closed within a few housekeeping rounds of its second; reading then ends with the close.
        var closed = false
        do {
            _ = try idler.readMessage(timeout: 10)
        } catch {
            closed = true
        }
        #expect(closed, "the idle, never logged-in connection is still open")
        #expect(server.waitForLog("not logged in within 1.0 s"), "\(server.log)")
        expectEqual(try member.call("ping")["ok"], true)
    }

    @Test("hostile auth requests: malformed ones are bad_request without costing a check, a huge user name is one short log line")
    func hostileAuthRequests() throws {
        let (server, scratch) = try serverWithAlice()
        defer { withExtendedLifetime(scratch) {} }
        let client = try server.connect()
        let malformed: [[String: JSONValue]] = [
            ["user": "alice"],                                                       // no password
            ["password": "correct horse"],                                           // no user
            ["user": 7, "password": "correct horse"],                                // not a string
            ["user": "alice", "password": .string(String(repeating: "p", count: 1025))],  // over 1,024 bytes
            ["token": "kvod_x", "user": "alice", "password": "correct horse"],       // both kinds
            ["token": 1],
        ]
        // More malformed requests than the failure limit: none is a failed login, the connection stays.
        for params in malformed + malformed {
            expectEqual(errorCode(try client.request("auth", params)), "bad_request", "\(params)")
        }
        // A megabyte-sized user name is an ordinary failure, logged with the name cut short.
        let huge = String(repeating: "u", count: 500_000)
        expectEqual(errorCode(try client.request("auth", ["user": .string(huge), "password": "x"], timeout: 30)), "unauthenticated")
        #expect(server.waitForLog("authentication failed for user"), "\(server.log)")
        #expect(server.log.utf8.count < 100_000, "the log repeats the client's user name")
        expectEqual(try client.call("auth", ["user": "alice", "password": "correct horse"], timeout: 30)["user"], "alice")
    }

    @Test("before auth, malformed requests other than hello, auth and ping get unauthenticated, not their shape errors")
    func malformedRequestsBeforeLogin() throws {
        let (server, scratch) = try serverWithAlice()
        defer { withExtendedLifetime(scratch) {} }
        let client = try server.connect()
        // Line, and the id the reply must echo (nil: none readable).
        let lines: [(String, JSONValue?)] = [
            (#"{"op":"set","object":"pub-1","keyPath":"a","id":1}"#, 1),   // missing 'value'
            (#"{"op":"get","object":"","id":"two"}"#, "two"),              // an empty object id
            (#"{"op":"observe","object":"o","keyPath":"a..b","id":3}"#, 3),// a bad key path
            (#"{"op":"nosuch","id":4}"#, 4),                               // an unknown op
            (#"{"id":5}"#, 5),                                             // no op
            (#"{"op":7,"id":6}"#, 6),                                      // op not a string
            (#"{"op":"userList","id":7,"extra":[1,2]}"#, 7),
            (#"{"op":"list","id":{"not":"scalar"}}"#, nil),
            (#"[1,2,3]"#, nil),
            (#"not JSON at all"#, nil),
        ]
        for (line, id) in lines {
            try client.send(raw: Array((line + "\n").utf8))
            let reply = try client.readMessage(timeout: 10)
            expectEqual(errorCode(reply), "unauthenticated", "\(line): \(reply)")
            expectEqual(reply["error"]?["message"]?.stringValue?.hasPrefix("authenticate first"), true, "\(line): \(reply)")
            expectEqual(reply["id"], id, "\(line): \(reply)")
        }
        // hello, auth and ping are still looked at, shape errors included.
        expectEqual(errorCode(try client.request("hello", ["events": "bogus"])), "bad_request")
        expectEqual(errorCode(try client.request("auth", ["user": "alice"])), "bad_request")
        // None of these was a failed login: the connection is open and logs in.
        expectEqual(try client.call("auth", ["user": "alice", "password": "correct horse"])["user"], "alice")
        // Logged in, shape errors are told.
        try client.send(raw: Array((#"{"op":"set","object":"pub-1","keyPath":"a","id":9}"# + "\n").utf8))
        let reply = try client.readMessage(timeout: 10)
        #expect(errorCode(reply) == "bad_request" && reply["error"]?["message"] == "missing 'value'", "\(reply)")
    }

    @Test("an unknown user costs what a wrong password for the users' common hash cost costs (minimal here)")
    func unknownUserTimingMatchesTheCommonCost() throws {
        // alice's hash has the minimal cost: a wrong password is answered in about a millisecond. An unknown
        // name was checked against a dummy hash of the interactive cost (about 150 ms): it told names apart.
        let (server, scratch) = try serverWithAlice()
        defer { withExtendedLifetime(scratch) {} }
        func timedFailure(_ user: String) throws -> Double {
            let client = try server.connect()
            defer { client.close() }
            let started = monotonicSeconds()
            let reply = try client.request("auth", ["user": .string(user), "password": "wrong"], timeout: 30)
            let elapsed = monotonicSeconds() - started
            expectEqual(errorCode(reply), "unauthenticated")
            return elapsed
        }
        var known: [Double] = [], unknown: [Double] = []
        for round in 0..<9 {
            known.append(try timedFailure("alice"))
            unknown.append(try timedFailure("nobody-\(round)"))
        }
        let knownMedian = known.sorted()[known.count / 2], unknownMedian = unknown.sorted()[unknown.count / 2]
        print("wrong password for a minimal-cost user: median \(String(format: "%.4f", knownMedian)) s; "
              + "unknown user: median \(String(format: "%.4f", unknownMedian)) s")
        // Robust to noise: medians of 9, and a bound far below an interactive-cost check (100 ms or more).
        #expect(unknownMedian < knownMedian * 3 + 0.02, "unknown \(unknown.sorted()) vs known \(known.sorted())")
        #expect(knownMedian < unknownMedian * 3 + 0.02, "unknown \(unknown.sorted()) vs known \(known.sorted())")
    }
}
