import Foundation
import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// `clients` and `kill` in-process with a manual clock (`EmbeddedConnection`): ages and idle times to the millisecond,
/// what a killed connection leaves behind (its observations, its session's grace), and killing the caller's own
/// connection. Over TCP, with users and kvoclient: `SlowAndClientsOverTCPTests`.
@Suite struct ClientsAndKillServerTests {
    private func entry(_ clients: JSONValue, _ connection: EmbeddedConnection) -> JSONValue? {
        clients["clients"]?.arrayValue?.first { $0["connection"] == .int(Int64(connection.connection.id.rawValue)) }
    }

    @Test("clients: each connection's kind, age, idle time, observations, output buffered and session, by id")
    func listing() throws {
        let clock = ServerClock.manual()
        let server = try EmbeddedServer.make(clock: clock)
        let quiet = server.makeEmbeddedConnection()
        server.advanceTime(by: 2)
        let busy = server.makeEmbeddedConnection()
        try busy.call(#"{"op":"create","object":"o","values":{"n":1}}"#)
        try busy.call(#"{"op":"observe","object":"o","keyPath":"n"}"#)
        try busy.call(#"{"op":"observe","pattern":"o*"}"#)
        let session = try #require(try busy.call(#"{"op":"session","grace":30}"#)["session"]?.stringValue)
        server.advanceTime(by: 1.5)
        let admin = server.makeEmbeddedConnection()
        let clients = try admin.call(#"{"op":"clients"}"#)
        #expect(clients["clients"]?.arrayValue?.map { $0["connection"]?.intValue ?? 0 }
                == [quiet, busy, admin].map { Int64($0.connection.id.rawValue) }, "by id: \(clients)")
        let quietEntry = try #require(entry(clients, quiet))
        #expect(quietEntry["age"] == 3.5 && quietEntry["idle"] == 3.5, "idle since it opened: \(quietEntry)")
        #expect(quietEntry["kind"] == "unix" && quietEntry["address"] == "unix:embedded" && quietEntry["user"] == .null)
        #expect(quietEntry["observations"] == 0 && quietEntry["session"] == .null && quietEntry["outputBytes"] == 0 && quietEntry["own"] == nil)
        let busyEntry = try #require(entry(clients, busy))
        #expect(busyEntry["age"] == 1.5 && busyEntry["idle"] == 1.5 && busyEntry["observations"] == 2 && busyEntry["session"] == .string(session),
                "\(busyEntry)")
        #expect(entry(clients, admin)?["own"] == true && entry(clients, admin)?["age"]?.doubleValue == 0)
        #expect(server.stopEmbedded().loopClosedCleanly)
    }

    @Test("kill: the connection is told why and closed; its observations end and its session waits its grace, as on any disconnect")
    func killAsADisconnect() throws {
        let clock = ServerClock.manual()
        let server = try EmbeddedServer.make(clock: clock)
        let victim = server.makeEmbeddedConnection()
        let admin = server.makeEmbeddedConnection()
        try victim.call(#"{"op":"create","object":"room","values":{"n":1}}"#)
        try victim.call(#"{"op":"observe","object":"room","keyPath":"n"}"#)
        try victim.call(#"{"op":"session","grace":5}"#)
        try victim.call(#"{"op":"onDisconnect","request":{"op":"set","object":"room","keyPath":"n","value":0}}"#)
        let id = Int64(victim.connection.id.rawValue)
        let reply = try admin.call(#"{"op":"kill","id":"k","connection":\#(id)}"#)
        #expect(reply["ok"] == true && reply["id"] == "k" && reply["connection"] == .int(id) && reply["own"] == false)
        let told = try victim.takeLines().map { try JSONParser.parse($0) }
        #expect(told.count == 1 && told[0]["id"] == nil && told[0]["error"]?["code"] == "closed", "\(told)")
        expectEqual(told[0]["error"]?["message"]?.stringValue?.hasPrefix("closed by a server admin (kill from connection \(admin.connection.id))"), true)
        server.step()
        #expect(victim.serverClosed)
        #expect(server.engine.observationCount == 0 && server.connectionCount == 1)
        expectEqual(server.sessions.detachedCount, 1, "the session waits its grace, as after any disconnect")
        server.advanceTime(by: 4.999)
        expectEqual(try admin.call(#"{"op":"get","object":"room","keyPath":"n"}"#)["value"], 1)
        server.advanceTime(by: 0.001)
        expectEqual(try admin.call(#"{"op":"get","object":"room","keyPath":"n"}"#)["value"], 0, "the grace ended: onDisconnect ran")
        // The id is gone: not_found, and the admin's connection keeps serving.
        expectEqual(try admin.call(#"{"op":"kill","connection":\#(id)}"#)["error"]?["code"], "not_found")
        expectEqual(try admin.call(#"{"op":"ping"}"#)["ok"], true)
        #expect(server.stopEmbedded().loopClosedCleanly)
    }

    @Test("kill of the caller's own connection answers first, then tells and closes it; a pipelined line after it is not run")
    func killOwnConnection() throws {
        let clock = ServerClock.manual()
        let server = try EmbeddedServer.make(clock: clock)
        let admin = server.makeEmbeddedConnection()
        let id = admin.connection.id.rawValue
        admin.send(line: #"{"op":"kill","id":1,"connection":\#(id)}"# + "\n" + #"{"op":"create","id":2,"object":"after"}"#)
        let lines = try admin.takeLines(atLeast: 2).map { try JSONParser.parse($0) }
        expectEqual(lines.count, 2, "\(lines)")
        #expect(lines.first?["id"] == 1 && lines.first?["own"] == true && lines.first?["connection"] == .int(Int64(id)))
        #expect(lines.last?["id"] == nil && lines.last?["error"]?["code"] == "closed")
        server.step()
        #expect(admin.serverClosed && server.connectionCount == 0)
        expectEqual(server.engine.objectCount, 0, "the line after the kill was not run")
        #expect(server.stopEmbedded().loopClosedCleanly)
    }
}
