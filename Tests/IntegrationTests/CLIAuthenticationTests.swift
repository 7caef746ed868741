import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// kvoclient logging in (`--user` with KVOD_PASSWORD, `--token` with KVOD_TOKEN) before every command,
/// against the real kvod with users.
@Suite("kvoclient authentication")
struct CLIAuthenticationTests {
    private func serverWithAlice() throws -> (KVODProcess, TemporaryDirectory) {
        let scratch = try TemporaryDirectory("cli-auth")
        let usersFile = scratch.appending("users.json")
        try KVODUserTool.addUser("alice", password: "correct horse", usersFile: usersFile)
        return (try KVODProcess(["--users", usersFile]), scratch)
    }

    @Test("--user with KVOD_PASSWORD logs in first; every command then works")
    func userAndPassword() throws {
        let (server, _) = try serverWithAlice()
        let alice = ["KVOD_PASSWORD": "correct horse"]
        var result = try KVOClientProcess.run(server, ["--user", "alice", "create", "o", #"{"n":1}"#], environment: alice)
        expectEqual(result.status, 0, "\(result.stderr)")
        result = try KVOClientProcess.run(server, ["get", "o", "n", "--user", "alice"], environment: alice)
        expectEqual(result.lines, ["1"], "\(result.stderr)")
        result = try KVOClientProcess.run(server, ["--user", "alice", "list"], environment: alice)
        expectEqual(result.lines, ["o"], "\(result.stderr)")
        let subscriber = try KVOClientProcess.start(server, ["--user", "alice", "subscribe", "o", "n", "--count", "1"], environment: alice)
        let watcher = try server.connect()
        try watcher.call("auth", ["user": "alice", "password": "correct horse"])
        _ = try waitForObservers(watcher, object: "o", count: 1)
        result = try KVOClientProcess.run(server, ["--user", "alice", "set", "o", "n", "2"], environment: alice)
        expectEqual(result.status, 0, "\(result.stderr)")
        let subscription = subscriber.finish()
        expectEqual(subscription.status, 0, "\(subscription.stderr)")
        #expect(subscription.stdout.contains("2"), "\(subscription.stdout)")
    }

    @Test("without --user, or with a wrong password, the server's unauthenticated is reported (exit 1)")
    func refused() throws {
        let (server, _) = try serverWithAlice()
        var result = try KVOClientProcess.run(server, ["list"])
        expectEqual(result.status, 1)
        #expect(result.stderr.contains("unauthenticated"), "\(result.stderr)")
        result = try KVOClientProcess.run(server, ["--user", "alice", "list"], environment: ["KVOD_PASSWORD": "wrong"])
        expectEqual(result.status, 1)
        #expect(result.stderr.contains("unauthenticated: wrong user name or password"), "\(result.stderr)")
    }

    @Test("--user without KVOD_PASSWORD and without a terminal is a usage error naming the variable; no password on argv")
    func noPassword() throws {
        let (server, _) = try serverWithAlice()
        let result = try KVOClientProcess.run(server, ["--user", "alice", "list"])
        expectEqual(result.status, 2)
        #expect(result.stderr.contains("KVOD_PASSWORD"), "\(result.stderr)")
        let token = try KVOClientProcess.run(server, ["--token", "list"])
        expectEqual(token.status, 2)
        #expect(token.stderr.contains("KVOD_TOKEN"), "\(token.stderr)")
    }
}
