import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// `kvod user …` on a stopped server's data directory, run as the real binary: each subcommand, the
/// users kept in the store (schema version 4) and honoured by the next kvod, a store written by the
/// previous schema (version 3) migrated in place, the password never taken from argv, and a refusal,
/// with nothing changed, while a kvod runs on the same directory.
@Suite("kvod user commands")
struct UserCommandsTests {
    private func errorCode(_ reply: JSONValue) -> String? { reply["error"]?["code"]?.stringValue }

    @Test("add, list, passwd, grant, revoke and remove on --data; the next kvod asks for the stored users")
    func everySubcommand() throws {
        let scratch = try TemporaryDirectory("users")
        let data = scratch.appending("data")
        var result = try KVODUserTool.run(["add", "--data", data, "--hash-cost", "minimal", "alice", "*=read,write,admin"], password: "first")
        expectEqual(result.status, 0, "\(result.stderr)")
        result = try KVODUserTool.run(["add", "--data", data, "--hash-cost", "minimal", "bob", "sensor-*=read"], password: "bobs")
        expectEqual(result.status, 0, "\(result.stderr)")
        result = try KVODUserTool.run(["add", "--data", data, "--hash-cost", "minimal", "bob"], password: "again")
        expectEqual(result.status, 1)
        #expect(result.stderr.contains("user 'bob' exists already"), "\(result.stderr)")

        result = try KVODUserTool.run(["grant", "--data", data, "bob", "sensor-*=write", "order-1=read"])
        expectEqual(result.lines, ["bob sensor-*=read,write order-1=read"], "\(result.stderr)")
        result = try KVODUserTool.run(["revoke", "--data", data, "bob", "sensor-*=read", "order-1=read"])
        expectEqual(result.lines, ["bob sensor-*=write"], "\(result.stderr)")
        result = try KVODUserTool.run(["grant", "--data", data, "bob", "no-equals-sign"])
        #expect(result.status != 0)
        #expect(result.stderr.contains("PATTERN=PERMISSIONS"), "\(result.stderr)")

        result = try KVODUserTool.run(["passwd", "--data", data, "--hash-cost", "minimal", "alice"], password: "second")
        expectEqual(result.status, 0, "\(result.stderr)")
        result = try KVODUserTool.run(["list", "--data", data])
        expectEqual(result.lines, ["alice *=read,write,admin", "bob sensor-*=write"], "\(result.stderr)")
        #expect(!result.stdout.contains("argon2"))

        // The stored users are what the server asks for.
        var server = try KVODProcess(dataDirectory: data)
        var client = try server.connect()
        expectEqual(errorCode(try client.request("list")), "unauthenticated")
        expectEqual(errorCode(try client.request("auth", ["user": "alice", "password": "first"])), "unauthenticated")
        expectEqual(try client.call("auth", ["user": "alice", "password": "second"])["user"], "alice")
        try client.call("create", ["object": "kept"])
        expectEqual(try server.connect().call("auth", ["user": "bob", "password": "bobs"])["user"], "bob")
        expectEqual(server.stop(), 0)

        result = try KVODUserTool.run(["remove", "--data", data, "bob"])
        expectEqual(result.status, 0, "\(result.stderr)")
        result = try KVODUserTool.run(["remove", "--data", data, "bob"])
        expectEqual(result.status, 1)
        #expect(result.stderr.contains("no user 'bob'"), "\(result.stderr)")
        expectEqual(try KVODUserTool.run(["list", "--data", data]).lines, ["alice *=read,write,admin"])

        server = try KVODProcess(dataDirectory: data)
        client = try server.connect()
        expectEqual(errorCode(try client.request("auth", ["user": "bob", "password": "bobs"])), "unauthenticated")
        try client.call("auth", ["user": "alice", "password": "second"])
        expectEqual(try client.call("list")["objects"], ["kept"])
    }

    @Test("usage errors exit 2 with one kvod user: error: line, as kvod's own")
    func usageErrors() throws {
        for arguments in [["bogus"], ["add"], ["grant", "--users", "/nonexistent/x.json", "bob", "no-equals"],
                          ["list", "--users", "a.json", "--data", "d"]] {
            let result = try KVODUserTool.run(arguments)
            expectEqual(result.status, 2, "\(arguments): \(result.stderr)")
            #expect(result.stderr.hasPrefix("kvod user: error: "), "\(arguments): \(result.stderr)")
        }
    }

    @Test("the password comes from KVOD_PASSWORD or a terminal, never from argv alone")
    func noPasswordNoUser() throws {
        let scratch = try TemporaryDirectory("users")
        let usersFile = scratch.appending("users.json")
        let result = try KVODUserTool.run(["add", "--users", usersFile, "carol"], password: nil)
        #expect(result.status != 0)
        #expect(result.stderr.contains("KVOD_PASSWORD"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: usersFile))
        let list = try KVODUserTool.run(["list", "--users", usersFile])
        #expect(list.status == 0 && list.lines.isEmpty)
    }

    @Test("with a kvod running on the same --data, kvod user refuses clearly and changes nothing")
    func refusedWhileRunning() throws {
        let scratch = try TemporaryDirectory("users")
        let data = scratch.appending("data")
        try #require(try KVODUserTool.run(["add", "--data", data, "--hash-cost", "minimal", "alice", "*=read,write,admin"],
                                          password: "pw").status == 0)
        let server = try KVODProcess(dataDirectory: data)
        for arguments in [["add", "--data", data, "--hash-cost", "minimal", "mallory", "*=admin"], ["remove", "--data", data, "alice"],
                          ["list", "--data", data]] {
            let result = try KVODUserTool.run(arguments, password: "x")
            expectEqual(result.status, 1, "\(arguments)")
            #expect(result.stderr.contains("is in use by a running kvod: stop it first"), "\(result.stderr)")
        }
        let client = try server.connect()
        try client.call("auth", ["user": "alice", "password": "pw"])
        expectEqual(server.stop(), 0)
        expectEqual(try KVODUserTool.run(["list", "--data", data]).lines, ["alice *=read,write,admin"])
    }

    @Test("with a kvod serving the same --users file, kvod user refuses to change it, and no user is lost")
    func usersFileRefusedWhileServed() throws {
        let scratch = try TemporaryDirectory("users")
        let usersFile = scratch.appending("users.json")
        try KVODUserTool.addUser("alice", password: "pw", usersFile: usersFile)
        let before = try String(contentsOfFile: usersFile, encoding: .utf8)
        let server = try KVODProcess(["--users", usersFile])
        for arguments in [["add", "--users", usersFile, "--hash-cost", "minimal", "bob", "*=read"], ["remove", "--users", usersFile, "alice"],
                          ["passwd", "--users", usersFile, "--hash-cost", "minimal", "alice"], ["grant", "--users", usersFile, "alice", "x=read"]] {
            let result = try KVODUserTool.run(arguments, password: "x")
            expectEqual(result.status, 1, "\(arguments): \(result.stdout) \(result.stderr)")
            #expect(result.stderr.contains("the users file '\(usersFile)' is in use by a running kvod: stop it first"), "\(result.stderr)")
        }
        expectEqual(try String(contentsOfFile: usersFile, encoding: .utf8), before, "the file is unchanged")
        // Listing is harmless: it reads the file as it is.
        expectEqual(try KVODUserTool.run(["list", "--users", usersFile]).lines, ["alice *=read,write,admin"])
        // An online change rewrites the file with the running kvod's users, as before.
        let admin = try server.connect()
        try admin.call("auth", ["user": "alice", "password": "pw"])
        try admin.call("userAdd", ["user": "carol", "password": "pw", "hashCost": "minimal"])
        expectEqual(server.stop(), 0)
        expectEqual(try KVODUserTool.run(["list", "--users", usersFile]).lines, ["alice *=read,write,admin", "carol"])
        // Stopped: the command works again.
        let added = try KVODUserTool.run(["add", "--users", usersFile, "--hash-cost", "minimal", "bob", "*=read"], password: "x")
        expectEqual(added.status, 0, "\(added.stderr)")
        expectEqual(try KVODUserTool.run(["list", "--users", usersFile]).lines, ["alice *=read,write,admin", "bob *=read", "carol"])
    }

    @Test("a data directory written by the previous schema (3) keeps its data and gains users")
    func migrationFromSchemaThree() throws {
        let scratch = try TemporaryDirectory("users")
        let data = scratch.appending("data")
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        let database = data + "/kvod.sqlite3"
        FileManager.default.createFile(atPath: database, contents: nil)
        // The version-3 schema, verbatim, with one object at revision 1.
        try SQLiteFile.execute("""
            CREATE TABLE objects(id TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
            CREATE TABLE meta(key TEXT PRIMARY KEY, value) WITHOUT ROWID;
            CREATE TABLE history(rev INTEGER PRIMARY KEY, object TEXT NOT NULL, change TEXT NOT NULL,
                                 bytes INTEGER NOT NULL);
            CREATE TABLE classes(name TEXT PRIMARY KEY, definition TEXT NOT NULL);
            CREATE TABLE bindings(id INTEGER PRIMARY KEY, definition TEXT NOT NULL);
            CREATE TABLE redo(object TEXT NOT NULL, rev INTEGER NOT NULL, change TEXT NOT NULL,
                              PRIMARY KEY(object, rev)) WITHOUT ROWID;
            INSERT INTO meta(key, value) VALUES('schema_version', 3), ('revision', 1), ('last_binding_id', 0);
            INSERT INTO objects(id, value) VALUES('old', '{"v":1}');
            """, at: database)
        // Opened by kvod as it was: still open mode, the object there.
        var server = try KVODProcess(dataDirectory: data)
        expectEqual(try server.connect().call("get", ["object": "old"])["value"], ["v": 1])
        expectEqual(server.stop(), 0)
        // Migrated: users can be added, and are then required.
        try #require(try KVODUserTool.run(["add", "--data", data, "--hash-cost", "minimal", "alice", "*=read,write,admin"],
                                          password: "pw").status == 0)
        server = try KVODProcess(dataDirectory: data)
        let client = try server.connect()
        expectEqual(errorCode(try client.request("get", ["object": "old"])), "unauthenticated")
        try client.call("auth", ["user": "alice", "password": "pw"])
        expectEqual(try client.call("get", ["object": "old"])["value"], ["v": 1])
        expectEqual(try client.call("set", ["object": "old", "keyPath": "v", "value": 2])["rev"], 2)
    }
}

/// API tokens: made offline (`kvod user token add`, shown once), stored hashed, accepted by `auth`
/// with `token` and `kvoclient --token`, revocable.
@Suite("API tokens")
struct APITokenTests {
    private func errorCode(_ reply: JSONValue) -> String? { reply["error"]?["code"]?.stringValue }

    @Test("a token logs in as its user until revoked; only its hash is stored; wrong tokens get the usual reply")
    func tokenLifecycle() throws {
        let scratch = try TemporaryDirectory("tokens")
        let data = scratch.appending("data")
        try #require(try KVODUserTool.run(["add", "--data", data, "--hash-cost", "minimal", "feed", "sensor-*=read,write"],
                                          password: "pw").status == 0)
        let made = try KVODUserTool.run(["token", "add", "--data", data, "feed"])
        try #require(made.status == 0, "\(made.stderr)")
        let token = try #require(made.lines.first)
        #expect(token.hasPrefix("kvod_") && token.count == 5 + 12 + 1 + 64, "\(token)")
        let id = String(token.dropFirst(5).prefix(12))
        expectEqual(try KVODUserTool.run(["token", "list", "--data", data, "feed"]).lines, [id])
        let second = try #require(try KVODUserTool.run(["token", "add", "--data", data, "feed"]).lines.first)
        #expect(second != token)

        var server = try KVODProcess(dataDirectory: data)
        // Only the hash is on disk: the secret part appears nowhere in the database.
        let database = try Data(contentsOf: URL(fileURLWithPath: data + "/kvod.sqlite3"))
        expectEqual(database.range(of: Data(token.suffix(64).utf8)), nil)
        var client = try server.connect()
        expectEqual(try client.call("auth", ["token": .string(token)])["user"], "feed")
        try client.call("create", ["object": "sensor-1"])
        let wrong = try server.connect()
        var tampered = token
        tampered.removeLast()
        tampered += token.hasSuffix("0") ? "1" : "0"
        let unknown = try wrong.request("auth", ["token": .string(tampered)])
        // On a connection of its own: the reply counts the connection's failures (attemptsLeft).
        var expected = try server.connect().request("auth", ["user": "feed", "password": "not it"]).objectValue!
        var got = unknown.objectValue!
        expected["id"] = nil
        got["id"] = nil
        expectEqual(got, expected)
        expectEqual(errorCode(try wrong.request("auth", ["token": "kvod_nonsense"])), "unauthenticated")
        // kvoclient --token reads KVOD_TOKEN.
        let listed = try KVOClientProcess.run(server, ["--token", "list"], environment: ["KVOD_TOKEN": token])
        expectEqual(listed.lines, ["sensor-1"], "\(listed.stderr)")
        expectEqual(server.stop(), 0)

        let revoked = try KVODUserTool.run(["token", "revoke", "--data", data, "feed", id])
        expectEqual(revoked.status, 0, "\(revoked.stderr)")
        expectEqual(try KVODUserTool.run(["token", "list", "--data", data, "feed"]).lines, [String(second.dropFirst(5).prefix(12))])
        server = try KVODProcess(dataDirectory: data)
        client = try server.connect()
        expectEqual(errorCode(try client.request("auth", ["token": .string(token)])), "unauthenticated")
        expectEqual(try client.call("auth", ["token": .string(second)])["user"], "feed")
    }
}
