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
        #expect(hello["id"] == 1)
        #expect(hello["ok"] == true)
        #expect(hello["server"] == "kvod")
        #expect(try call(client, #"{"op":"create","id":"a","object":"person","values":{"city":"London"}}"#)["rev"] == 1)
        let got = try call(client, #"{"op":"get","id":3,"object":"person","keyPath":"city"}"#)
        #expect(got["id"] == 3)
        #expect(got["value"] == "London")
        let mismatch = try call(client, #"{"op":"set","id":4,"object":"person","keyPath":"city.zip","value":1}"#)
        #expect(mismatch["ok"] == false)
        #expect(mismatch["error"]?["code"] == "type_mismatch")
        let unknown = try call(client, #"{"op":"frobnicate","id":"x"}"#)
        #expect(unknown["id"] == "x")
        #expect(unknown["error"]?["code"] == "unknown_op")
        #expect(try call(client, "not json")["error"]?["code"] == "bad_request")
        // Pipelined: three requests in one write, three replies in order.
        client.send(Array(#"{"op":"ping","id":10}"#.utf8) + [0x0A] + Array(#"{"op":"ping","id":11}"#.utf8) + [0x0A]
                    + Array(#"{"op":"list","id":12}"#.utf8) + [0x0A])
        let replies = try client.takeLines(atLeast: 3).map { try JSONParser.parse($0) }
        #expect(replies.map { $0["id"] } == [10, 11, 12])
        #expect(replies.last?["objects"] == ["person"])
        #expect(server.connectionCount == 1)
        client.close()
        server.step()
        #expect(server.connectionCount == 0, "the server saw the client leave")
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
        #expect(try call(client, #"{"op":"ping","id":1}"#)["ok"] == true)
        let refused = try call(client, #"{"op":"list","id":2}"#)
        #expect(refused["error"]?["code"] == "unauthenticated")
        let wrong = try call(client, #"{"op":"auth","id":3,"user":"alice","password":"wrong"}"#)
        #expect(wrong["id"] == 3)
        #expect(wrong["error"]?["code"] == "unauthenticated")
        let login = try call(client, #"{"op":"auth","id":4,"user":"alice","password":"correct horse"}"#)
        #expect(login["ok"] == true)
        #expect(login["user"] == "alice")
        #expect(try call(client, #"{"op":"create","id":5,"object":"o"}"#)["ok"] == true)
        #expect(try call(client, #"{"op":"list","id":6}"#)["objects"] == ["o"])
        // A second connection is a session of its own: not logged in.
        let other = server.makeEmbeddedConnection()
        #expect(try call(other, #"{"op":"get","id":1,"object":"o"}"#)["error"]?["code"] == "unauthenticated")
        #expect(server.stopEmbedded().loopClosedCleanly)
    }

    @Test("fan-out: an event for a set on one connection arrives on the connection observing")
    func fanOut() throws {
        let server = try makeServer()
        let observer = server.makeEmbeddedConnection()
        let writer = server.makeEmbeddedConnection()
        #expect(try call(writer, #"{"op":"create","id":1,"object":"person","values":{"city":"London"}}"#)["ok"] == true)
        let observed = try call(observer, #"{"op":"observe","id":1,"object":"person","keyPath":"city","options":["new","old"]}"#)
        #expect(observed["ok"] == true)
        let subscription = try #require(observed["sub"])
        #expect(try call(writer, #"{"op":"set","id":2,"object":"person","keyPath":"city","value":"Paris"}"#)["rev"] == 2)
        let events = try observer.takeLines().map { try JSONParser.parse($0) }
        try #require(events.count == 1, "\(events)")
        #expect(events[0]["event"] == "change")
        #expect(events[0]["sub"] == subscription)
        #expect(events[0]["object"] == "person")
        #expect(events[0]["rev"] == 2)
        #expect(events[0]["change"]?["new"] == "Paris")
        #expect(events[0]["change"]?["old"] == "London")
        #expect(writer.takeOutput().isEmpty, "the writer does not observe: nothing but its reply")
        // After unobserve, a set reaches nobody.
        #expect(try call(observer, #"{"op":"unobserve","id":2,"sub":\#(subscription)}"#)["ok"] == true)
        #expect(try call(writer, #"{"op":"set","id":3,"object":"person","keyPath":"city","value":"Rome"}"#)["rev"] == 3)
        #expect(observer.takeOutput().isEmpty)
        #expect(server.stopEmbedded().loopClosedCleanly)
    }
}
