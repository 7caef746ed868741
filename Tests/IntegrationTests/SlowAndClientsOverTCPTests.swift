import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// `slow`, `clients` and `kill` on a real kvod over TCP, and `kvoclient slow`, `clients` and `kill` (issue 42, items 6
/// and 7): with `--slow-request 0` every request is in the log, which names operations, objects and key paths but never
/// a value; server admins only, refused to anyone else without telling them anything; strict fields; hostile ids
/// refused without harm. Timing to the microsecond, with a manual clock, is `SlowRequestLogTests`' (in-process).
@Suite("slow, clients and kill over TCP")
struct SlowAndClientsOverTCPTests {
    private func errorCode(_ reply: JSONValue) -> String? { reply["error"]?["code"]?.stringValue }

    /// kvod with users `alice` (server admin) and `bob` (read and write everywhere, no admin), `extra` flags.
    private func server(_ extra: [String]) throws -> (KVODProcess, TemporaryDirectory) {
        let scratch = try TemporaryDirectory("slow")
        let usersFile = scratch.appending("users.json")
        try KVODUserTool.addUser("alice", password: "root", usersFile: usersFile)
        try KVODUserTool.addUser("bob", password: "bobs", rules: ["*=read,write"], usersFile: usersFile)
        return (try KVODProcess(["--users", usersFile] + extra), scratch)
    }

    private func login(_ server: KVODProcess, _ user: String, _ password: String) throws -> KVOConnection {
        let connection = try server.connect()
        try connection.call("auth", ["user": .string(user), "password": .string(password)], timeout: 30)
        return connection
    }

    @Test("--slow-request 0 keeps every request, without values; kvoclient slow prints them, --reset empties the log")
    func everyRequestKeptWithoutValues() throws {
        let (server, scratch) = try server(["--slow-request", "0"])
        defer { withExtendedLifetime(scratch) {} }
        let alice = try login(server, "alice", "root")
        let bob = try login(server, "bob", "bobs")
        try bob.call("create", ["object": "vault", "values": ["pin": "4711-secret"]])
        try bob.call("set", ["object": "vault", "keyPath": "pin", "value": "0815-secret"])
        expectEqual(errorCode(try bob.request("get", ["object": "vault", "keyPath": "nope.deeper"])), nil)

        let reply = try alice.call("slow")
        expectEqual(reply["thresholdMicros"], 0)
        let requests = try #require(reply["requests"]?.arrayValue)
        let bobs = requests.filter { $0["user"] == "bob" }
        // Newest first: the get, the set, the create. Not bob's auth: answered after its password check, off the loop.
        expectEqual(bobs.map { $0["op"] }, ["get", "set", "create"], "\(bobs)")
        #expect(bobs[1]["object"] == "vault" && bobs[1]["keyPath"] == "pin" && bobs[2]["keyPath"] == nil)
        #expect(bobs.allSatisfy { $0["connection"] != nil && ($0["micros"]?.intValue ?? -1) >= 0 && ($0["at"]?.intValue ?? 0) > 0 })
        #expect(!JSONValue.object(reply).description.contains("secret"), "no value in the log: \(reply)")
        #expect((reply["stalls"]?.arrayValue?.count ?? 0) > 0, "with a threshold of 0 every loop iteration is a stall")

        // The CLI: one line per request, newest first; --reset prints and empties.
        let environment = ["KVOD_PASSWORD": "root"]
        let printed = try KVOClientProcess.run(server, ["--user", "alice", "slow"], environment: environment)
        expectEqual(printed.status, 0, "\(printed.stderr)")
        let setLine = try #require(printed.lines.first { $0.contains("op=set") })
        #expect(setLine.hasPrefix("request  at=20") && setLine.contains("  object=vault  keyPath=pin  ") && setLine.hasSuffix("user=bob"),
                "\(setLine)")
        #expect(printed.lines.contains { $0.hasPrefix("stall  at=") && $0.contains("  requests=") })
        #expect(!printed.stdout.contains("secret"))
        let json = try KVOClientProcess.run(server, ["--user", "alice", "slow", "--json", "--reset"], environment: environment)
        #expect(json.status == 0 && json.lines.count == 1, "\(json.stderr)")
        let parsed = try JSONParser.parse(json.lines[0])
        expectEqual(parsed["requests"]?.arrayValue?.contains { $0["op"] == "set" && $0["user"] == "bob" }, true)
        // After the reset only what came since: this request's own login and the requests after it.
        let after = try alice.call("slow")
        expectEqual(after["requests"]?.arrayValue?.contains { $0["user"] == "bob" }, false, "\(after)")

        let metrics = try alice.call("metrics")["text"]?.stringValue ?? ""
        #expect(metrics.contains(#"kvod_slow_requests_total{op="set"} 1"#), "\(metrics.prefix(200))")
        #expect(metrics.contains("kvod_loop_stalls_total "))
    }

    @Test("--slow-request from the config file, changed by SIGHUP: from then on every request is kept")
    func thresholdReloadedOnSIGHUP() throws {
        let directory = try TemporaryDirectory("slow-config")
        let file = directory.appending("kvod.conf")
        try "slow-request = 60000\n".write(toFile: file, atomically: true, encoding: .utf8)
        let server = try KVODProcess(["--config", file])
        let client = try server.connect()
        try client.call("create", ["object": "o"])
        let before = try client.call("slow")
        #expect(before["thresholdMicros"] == 60_000_000 && before["requests"] == [], "\(before)")
        try "slow-request = 0\n".write(toFile: file, atomically: true, encoding: .utf8)
        server.send(signal: SIGHUP)
        #expect(server.waitForLog("config reload: slow-request 60000 -> 0"), "\(server.log)")
        try client.call("get", ["object": "o"])
        let after = try client.call("slow")
        expectEqual(after["thresholdMicros"], 0)
        expectEqual(after["requests"]?.arrayValue?.map { $0["op"] }, ["get"], "only what came after the reload: \(after)")
    }

    @Test("slow, clients and kill: server admins only, refused to others alike whatever they ask; strict fields; hostile ids")
    func adminsOnlyStrictAndHostileInput() throws {
        let (server, scratch) = try server([])
        defer { withExtendedLifetime(scratch) {} }
        let alice = try login(server, "alice", "root")
        let bob = try login(server, "bob", "bobs")
        let aliceID = try #require(try alice.call("hello")["connection"]?.intValue)
        for (op, params) in [("slow", [:]), ("slow", ["reset": true]), ("clients", [:]), ("kill", ["connection": .int(aliceID)]),
                             ("kill", ["connection": 999_999])] as [(String, [String: JSONValue])] {
            let refused = try bob.request(op, params)
            expectEqual(errorCode(refused), "forbidden", "\(op): \(refused)")
            expectEqual(refused["error"]?["message"]?.stringValue?.hasPrefix("\(op) needs 'admin' on every object"), true, "\(refused)")
        }
        expectEqual(errorCode(try server.connect().request("clients")), "unauthenticated")
        // Bob is still connected and served after every refusal, and alice was not killed.
        expectEqual(try bob.call("ping")["ok"], true)
        expectEqual(try alice.call("ping")["ok"], true)

        for (params, problem) in [
            (["connection": -1], "'connection' must be a connection id (a positive integer), not -1"),
            (["connection": 0], "'connection' must be a connection id (a positive integer), not 0"),
            (["connection": "1"], "'connection' must be a connection id (a positive integer), not a string"),
            (["connection": 1.5], "'connection' must be"),
            (["connection": .null], "'connection'"),
            ([:], "missing 'connection'"),
            (["connection": 1, "force": true], "unknown field 'force'"),
        ] as [([String: JSONValue], String)] {
            let refused = try alice.request("kill", params)
            expectEqual(errorCode(refused), "bad_request", "\(params): \(refused)")
            expectEqual(refused["error"]?["message"]?.stringValue?.hasPrefix(problem), true, "\(params): \(refused)")
        }
        for id in [Int64.max, 999_999, aliceID + 1_000] {
            let refused = try alice.request("kill", ["connection": .int(id)])
            expectEqual(errorCode(refused), "not_found", "\(id): \(refused)")
        }
        // An integer past 64 bits is refused by the parser (no id: the line was not read).
        try alice.send(raw: Array(#"{"op":"kill","id":7,"connection":18446744073709551616}"#.utf8) + [0x0A])
        expectEqual(errorCode(try alice.readMessage()), "bad_request")
        expectEqual(errorCode(try alice.request("clients", ["limit": 1])), "bad_request")
        expectEqual(errorCode(try alice.request("slow", ["reset": "yes"])), "bad_request")
        expectEqual(errorCode(try alice.request("slow", ["rest": true])), "bad_request")
        // After all that, everyone is still connected.
        let clients = try #require(try alice.call("clients")["clients"]?.arrayValue)
        #expect(clients.count == 2 && clients.allSatisfy { $0["kind"] == "tcp" }, "\(clients)")
        expectEqual(try bob.call("ping")["ok"], true)
    }

    @Test("clients lists every connection; kill closes one as a disconnect does, tells it why, and can close the caller's own")
    func clientsAndKill() throws {
        let (server, scratch) = try server([])
        defer { withExtendedLifetime(scratch) {} }
        let alice = try login(server, "alice", "root")
        let bob = try login(server, "bob", "bobs")
        try bob.call("create", ["object": "room", "values": ["n": 1]])
        try bob.call("observe", ["object": "room", "keyPath": "n"])
        let session = try #require(try bob.call("session", ["grace": 0])["session"]?.stringValue)
        try bob.call("onDisconnect", ["request": ["op": "set", "object": "room", "keyPath": "n", "value": 0]])
        let bobID = try #require(try bob.call("hello")["connection"]?.intValue)
        let stranger = try server.connect()

        let clients = try #require(try alice.call("clients")["clients"]?.arrayValue)
        expectEqual(clients.count, 3)
        let bobEntry = try #require(clients.first { $0["connection"] == .int(bobID) })
        #expect(bobEntry["user"] == "bob" && bobEntry["kind"] == "tcp" && bobEntry["observations"] == 1 && bobEntry["session"] == .string(session))
        expectEqual(bobEntry["address"]?.stringValue?.hasPrefix("127.0.0.1:"), true)
        #expect((bobEntry["age"]?.doubleValue ?? -1) >= 0 && (bobEntry["idle"]?.doubleValue ?? -1) >= 0 && bobEntry["outputBytes"] == 0)
        #expect(clients.contains { $0["user"] == .null && $0["observations"] == 0 && $0["session"] == .null }, "the stranger")
        expectEqual(clients.filter { $0["own"] == true }.map { $0["user"] }, ["alice"])

        // The CLI lists them too, its own connection marked.
        let environment = ["KVOD_PASSWORD": "root"]
        let listed = try KVOClientProcess.run(server, ["--user", "alice", "clients"], environment: environment)
        #expect(listed.status == 0 && listed.lines.count == 4, "\(listed.stdout) \(listed.stderr)")
        #expect(listed.lines.contains { $0.hasPrefix("\(bobID)  kind=tcp  address=127.0.0.1:") && $0.contains("  user=bob  ")
                && $0.contains("  observations=1  outputBytes=0  session=\(session)") }, "\(listed.lines)")
        expectEqual(listed.lines.filter { $0.hasSuffix("(this one)") }.count, 1)
        // Ages in seconds with three decimals (the test's connections are seconds old at most, not thousands).
        let ages = listed.lines.compactMap { line in
            line.split(separator: " ").first { $0.hasPrefix("age=") }.flatMap { Double($0.dropFirst(4)) }
        }
        #expect(ages.count == 4 && ages.allSatisfy { $0 >= 0 && $0 < 120 }, "\(listed.lines)")

        // kill: bob is told why and closed; his observation is gone and his session's action ran (grace 0).
        let killed = try KVOClientProcess.run(server, ["--user", "alice", "kill", String(bobID)], environment: environment)
        expectSuccess(killed, lines: ["killed \(bobID)"])
        let told = try bob.readMessage()
        #expect(told["id"] == nil && errorCode(told) == "closed", "\(told)")
        expectEqual(told["error"]?["message"]?.stringValue?.hasPrefix("closed by a server admin (kill from connection "), true, "\(told)")
        #expect(throws: KVOClientError.self) { try bob.readMessage(timeout: 5) }
        #expect(server.waitForLog("connection closed by kill"))
        let deadline = monotonicSeconds() + 10
        while try alice.call("get", ["object": "room", "keyPath": "n"])["value"] != 0, monotonicSeconds() < deadline { usleep(20_000) }
        expectEqual(try alice.call("get", ["object": "room", "keyPath": "n"])["value"], 0, "the session's onDisconnect ran")
        expectEqual(try alice.call("info", ["object": "room"])["observers"], [], "bob's observation ended with his connection")

        // An id that was just closed, again: not_found; the CLI exits 1 with the server's error.
        let again = try KVOClientProcess.run(server, ["--user", "alice", "kill", String(bobID)], environment: environment)
        #expect(again.status == 1 && again.stderr.contains("not_found: no open connection has id \(bobID)"), "\(again.stderr)")
        let usage = try KVOClientProcess.run(server, ["kill", "-3"])
        #expect(usage.status == 2 && usage.stderr.contains("must be 1 or more"), "\(usage.stderr)")

        // Killing the caller's own connection: the reply says so, then the connection is told and closed.
        let aliceID = try #require(try alice.call("hello")["connection"]?.intValue)
        let own = try alice.call("kill", ["connection": .int(aliceID)])
        #expect(own["connection"] == .int(aliceID) && own["own"] == true)
        expectEqual(errorCode(try alice.readMessage()), "closed")
        #expect(throws: KVOClientError.self) { try alice.readMessage(timeout: 5) }
        expectEqual(try stranger.request("ping")["ok"], true, "the others keep being served")
    }
}
