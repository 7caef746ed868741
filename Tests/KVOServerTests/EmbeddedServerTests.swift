import Foundation
import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// Dispatch, sessions and fan-out driven in-process (`EmbeddedConnection`): request bytes in, reply and
/// event bytes out, the loop run one non-blocking iteration per step, no TCP and no thread. The same
/// behaviour over real sockets is the `*OverTCPTests` suites'.
@Suite struct EmbeddedServerTests {
    /// An in-memory server with no listener (users from `usersFile`, when given).
    private func makeServer(usersFile: String? = nil) throws -> Server {
        var configuration = ServerConfiguration()
        configuration.isEmbedded = true
        configuration.listensForPlaintext = false
        configuration.usersFile = usersFile
        configuration.firstRequestTimeout = 0
        return try Server(configuration: configuration)
    }

    /// Sends `request` and returns the one reply line, parsed.
    private func call(_ client: EmbeddedConnection, _ request: String) throws -> JSONValue {
        client.send(line: request)
        let lines = client.takeLines()
        try #require(lines.count == 1, "one reply to \(request): \(lines)")
        return try JSONParser.parse(lines[0])
    }

    @Test("dispatch: replies carry the request's id, results and error codes")
    func dispatch() throws {
        let server = try makeServer()
        let client = server.makeEmbeddedConnection()
        let hello = try call(client, #"{"op":"hello","id":1,"client":"embedded"}"#)
        expectEqual(hello["id"], 1)
        expectEqual(hello["ok"], true)
        expectEqual(hello["server"], "kvod")
        expectEqual(try call(client, #"{"op":"create","id":"a","object":"person","values":{"city":"London"}}"#)["rev"], 1)
        let got = try call(client, #"{"op":"get","id":3,"object":"person","keyPath":"city"}"#)
        expectEqual(got["id"], 3)
        expectEqual(got["value"], "London")
        let mismatch = try call(client, #"{"op":"set","id":4,"object":"person","keyPath":"city.zip","value":1}"#)
        expectEqual(mismatch["ok"], false)
        expectEqual(mismatch["error"]?["code"], "type_mismatch")
        let unknown = try call(client, #"{"op":"frobnicate","id":"x"}"#)
        expectEqual(unknown["id"], "x")
        expectEqual(unknown["error"]?["code"], "unknown_op")
        expectEqual(try call(client, "not json")["error"]?["code"], "bad_request")
        // Pipelined: three requests in one write, three replies in order.
        client.send(Array(#"{"op":"ping","id":10}"#.utf8) + [0x0A] + Array(#"{"op":"ping","id":11}"#.utf8) + [0x0A]
                    + Array(#"{"op":"list","id":12}"#.utf8) + [0x0A])
        let replies = try client.takeLines(atLeast: 3).map { try JSONParser.parse($0) }
        expectEqual(replies.map { $0["id"] }, [10, 11, 12])
        expectEqual(replies.last?["objects"], ["person"])
        expectEqual(server.connectionCount, 1)
        client.close()
        server.step()
        expectEqual(server.connectionCount, 0, "the server saw the client leave")
        #expect(server.stopEmbedded().loopClosedCleanly)
    }

    @Test("sessions: with users, nothing but hello, auth and ping before a login; auth logs in")
    func sessions() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("kvod-embedded-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let users = UserDirectory()
        try users.add(UserRecord(name: "alice", passwordHash: try PasswordHasher.hash("correct horse", cost: .minimal),
                                 rules: [try AccessRule(argument: "*=read,write")]))
        let usersFile = directory.appendingPathComponent("users.json").path
        try UsersFile.save(users, to: usersFile)
        let server = try makeServer(usersFile: usersFile)
        let client = server.makeEmbeddedConnection()
        expectEqual(try call(client, #"{"op":"ping","id":1}"#)["ok"], true)
        let refused = try call(client, #"{"op":"list","id":2}"#)
        expectEqual(refused["error"]?["code"], "unauthenticated")
        let wrong = try call(client, #"{"op":"auth","id":3,"user":"alice","password":"wrong"}"#)
        expectEqual(wrong["id"], 3)
        expectEqual(wrong["error"]?["code"], "unauthenticated")
        let login = try call(client, #"{"op":"auth","id":4,"user":"alice","password":"correct horse"}"#)
        expectEqual(login["ok"], true)
        expectEqual(login["user"], "alice")
        expectEqual(try call(client, #"{"op":"create","id":5,"object":"o"}"#)["ok"], true)
        expectEqual(try call(client, #"{"op":"list","id":6}"#)["objects"], ["o"])
        // A second connection is a session of its own: not logged in.
        let other = server.makeEmbeddedConnection()
        expectEqual(try call(other, #"{"op":"get","id":1,"object":"o"}"#)["error"]?["code"], "unauthenticated")
        #expect(server.stopEmbedded().loopClosedCleanly)
    }

    @Test("fan-out: an event for a set on one connection arrives on the connection observing")
    func fanOut() throws {
        let server = try makeServer()
        let observer = server.makeEmbeddedConnection()
        let writer = server.makeEmbeddedConnection()
        expectEqual(try call(writer, #"{"op":"create","id":1,"object":"person","values":{"city":"London"}}"#)["ok"], true)
        let observed = try call(observer, #"{"op":"observe","id":1,"object":"person","keyPath":"city","options":["new","old"]}"#)
        expectEqual(observed["ok"], true)
        let subscription = try #require(observed["sub"])
        expectEqual(try call(writer, #"{"op":"set","id":2,"object":"person","keyPath":"city","value":"Paris"}"#)["rev"], 2)
        let events = try observer.takeLines().map { try JSONParser.parse($0) }
        try #require(events.count == 1, "\(events)")
        expectEqual(events[0]["event"], "change")
        expectEqual(events[0]["sub"], subscription)
        expectEqual(events[0]["object"], "person")
        expectEqual(events[0]["rev"], 2)
        expectEqual(events[0]["change"]?["new"], "Paris")
        expectEqual(events[0]["change"]?["old"], "London")
        #expect(writer.takeOutput().isEmpty, "the writer does not observe: nothing but its reply")
        // After unobserve, a set reaches nobody.
        expectEqual(try call(observer, #"{"op":"unobserve","id":2,"sub":\#(subscription)}"#)["ok"], true)
        expectEqual(try call(writer, #"{"op":"set","id":3,"object":"person","keyPath":"city","value":"Rome"}"#)["rev"], 3)
        #expect(observer.takeOutput().isEmpty)
        #expect(server.stopEmbedded().loopClosedCleanly)
    }
}
