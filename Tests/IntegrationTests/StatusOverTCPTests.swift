import Foundation
import KVOJSON
import KVOWireProbe
import Testing

@testable import KVOTestSupport

/// Issue 42, item 4, over the real kvod: the `status` operation tells what the server holds and serves (revision,
/// objects, connections by kind with the asking one, observations, storage, history, listeners, alarms), to server
/// admins only; a non-admin or a login-less connection learns nothing, and a request with a field the row does not
/// declare is refused (strict requests) while the connection keeps serving.
@Suite("status over TCP")
struct StatusOverTCPTests {
    private func errorCode(_ reply: JSONValue) -> String? { reply["error"]?["code"]?.stringValue }

    @Test("status reports the revision after N writes, the objects, the connections including the asking one, storage and history")
    func reportsWhatTheServerHolds() throws {
        let scratch = try TemporaryDirectory("status")
        let server = try KVODProcess(storage: .directory(scratch.appending("data")))
        let writer = try server.connect()
        var revision: Int64 = 0
        for index in 0..<3 {
            revision = try #require(writer.call("create", ["object": .string("o\(index)"), "values": ["n": 0]])["rev"]?.intValue)
        }
        for value in 1...4 {
            revision = try #require(writer.call("set", ["object": "o0", "keyPath": "n", "value": .int(Int64(value))])["rev"]?.intValue)
        }
        try writer.call("delete", ["object": "o2"])
        revision += 1
        let observer = try server.connect()
        try observer.call("observe", ["object": "o1", "keyPath": "n"])
        let admin = try server.connect()
        let status = try admin.call("status")
        let version = try #require(try admin.call("hello")["version"]?.stringValue)

        expectEqual(status["version"]?.stringValue, version)
        expectEqual(status["commit"]?.stringValue?.isEmpty, false)
        expectEqual(status["rev"]?.intValue, revision, "\(status)")
        expectEqual(status["objects"], 2)
        expectEqual(status["observations"], 1)
        expectEqual(status["connections"]?["total"], 3, "writer, observer and the asking one: \(status)")
        expectEqual(status["connections"]?["tcp"], 3)
        #expect(status["connections"]?["tls"] == 0 && status["connections"]?["unix"] == 0 && status["connections"]?["websocket"] == 0)
        expectEqual(status["sessions"], ["total": 0, "detached": 0])
        let storage = try #require(status["storage"]?.objectValue)
        #expect(storage["kind"] == "sqlite" && storage["state"] == "writable", "\(storage)")
        #expect((storage["databaseBytes"]?.intValue ?? 0) > 0, "\(storage)")
        #expect(storage["walBytes"]?.intValue != nil && (storage["fileSystemFreeBytes"]?.intValue ?? 0) > 0, "\(storage)")
        #expect(status["history"]?["oldestRev"] == 1 && status["history"]?["newestRev"]?.intValue == revision, "\(status)")
        expectEqual(status["history"]?["changes"]?.intValue, revision)
        expectEqual(status["cluster"], .null)
        expectEqual(status["alarms"], [])
        expectEqual(status["listeners"], [["role": "port", "address": .string("127.0.0.1:\(server.port)")]])
        let uptime = try #require(status["uptimeSeconds"]?.doubleValue)
        #expect(uptime >= 0 && uptime < 600)

        // Closed connections leave the count; the uptime goes on (the server's clock).
        observer.close()
        writer.close()
        Thread.sleep(forTimeInterval: 1.2)
        let later = try admin.call("status")
        expectEqual(later["connections"]?["total"], 1, "\(later)")
        expectEqual(later["observations"], 0)
        #expect((later["uptimeSeconds"]?.doubleValue ?? 0) >= uptime + 1, "\(later)")
        expectEqual(server.stop(), 0)
    }

    @Test("status and config are for server admins: others get forbidden and nothing else; before login, unauthenticated")
    func adminsOnly() throws {
        let scratch = try TemporaryDirectory("status-admin")
        let usersFile = scratch.appending("users.json")
        try KVODUserTool.addUser("alice", password: "root", usersFile: usersFile)
        try KVODUserTool.addUser("bob", password: "bobs", rules: ["*=read,write"], usersFile: usersFile)
        let server = try KVODProcess(["--users", usersFile])
        let bob = try server.connect()
        try bob.call("auth", ["user": "bob", "password": "bobs"], timeout: 30)
        try bob.call("create", ["object": "secret-count", "values": ["n": 1]])
        for op in ["status", "config", "digest", "metrics"] {
            let refused = try bob.request(op)
            expectEqual(errorCode(refused), "forbidden", "\(op): \(refused)")
            // Nothing of the server's state in the refusal: only the error and the request's id.
            expectEqual(Set(refused.objectValue?.keys.map { $0 } ?? []), ["ok", "id", "error"], "\(op): \(refused)")
            #expect(!refused.description.contains("\"rev\"") && !refused.description.contains("settings"), "\(refused)")
            expectEqual(errorCode(try server.connect().request(op)), "unauthenticated", "\(op)")
        }
        // The refused connection keeps serving.
        expectEqual(try bob.call("get", ["object": "secret-count", "keyPath": "n"])["value"], 1)
        let alice = try server.connect()
        try alice.call("auth", ["user": "alice", "password": "root"], timeout: 30)
        expectEqual(try alice.call("status")["objects"], 1)
        expectEqual(server.stop(), 0)
    }

    @Test("a status or config request with a field its row does not declare is bad_request naming it; nothing else is answered")
    func strictFields() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        let cases: [(String, [String: JSONValue], String)] = [
            ("status", ["verbose": true], "verbose"),
            ("status", ["object": "o"], "object"),
            ("status", ["atLeastRev": 1], "atLeastRev"),
            ("config", ["name": "port"], "name"),
            ("config", ["keyPath": "max-line"], "keyPath"),
        ]
        for (op, params, field) in cases {
            let reply = try client.request(op, params)
            expectEqual(errorCode(reply), "bad_request", "\(op) \(params): \(reply)")
            expectEqual(reply["error"]?["message"]?.stringValue?.contains(field), true, "\(reply)")
            #expect(reply["rev"] == nil && reply["settings"] == nil)
        }
        // Mistyped ids and a line that is no JSON: the usual refusals, and the connection serves on.
        try client.send(raw: Array(#"{"op":"status","id":[1,2]}"#.utf8) + [0x0A])
        expectEqual(errorCode(try client.readMessage()), "bad_request")
        try client.send(raw: Array(#"{"op":"config""#.utf8) + [0x0A])
        expectEqual(errorCode(try client.readMessage()), "bad_request")
        expectEqual(try client.call("status")["objects"], 0)
        expectEqual(try client.call("config")["settings"]?.arrayValue?.isEmpty, false)
        expectEqual(server.stop(), 0)
    }
}
