import Foundation
import KVOJSON
import Logging
import Testing

@testable import KVOServer

/// `--idle-timeout` driven in-process with a manual clock (`EmbeddedConnection`, real sockets in a pair): a quiet
/// connection gets one heartbeat at half the timeout and is closed at the timeout, to the millisecond; any bytes
/// (an answer, a ping, a partial line, a WebSocket pong) begin a new quiet spell; a vanished client's presence
/// session ends within the idle timeout plus its grace; 0 turns it off; a reload applies at once. The same over
/// TCP through a proxy that drops everything, and with the real kvod, is `IdleTimeoutOverTCPTests`'.
@Suite struct IdleTimeoutTests {
    private static let heartbeat = #"{"event":"heartbeat"}"#

    /// The value of `name` in the server's metrics.
    private func metric(_ name: String, _ client: EmbeddedConnection) throws -> String? {
        let text = try client.call(#"{"op":"metrics"}"#)["text"]?.stringValue ?? ""
        return text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.map { String($0.dropFirst(name.count + 1)) }
    }

    @Test("a quiet connection gets one heartbeat at half the idle timeout and is closed at the timeout; counted and logged")
    func heartbeatThenClose() throws {
        let log = CapturedLog()
        let logger = Logger(label: "kvod-test") { _ in CapturingLogHandler(log: log) }
        let server = try EmbeddedServer.make(clock: .manual(), logger: logger) { $0.idleTimeout = 10 }
        let quiet = server.makeEmbeddedConnection()
        let talker = server.makeEmbeddedConnection()
        #expect(try quiet.call(#"{"op":"ping"}"#)["ok"] == true)
        var heartbeats: [Double] = []
        var closedAt: Double?
        var elapsed = 0.0
        while closedAt == nil, elapsed < 20 {
            server.advanceTime(by: 0.25)
            elapsed += 0.25
            #expect(try talker.call(#"{"op":"ping"}"#)["ok"] == true)
            for line in quiet.takeLines(atLeast: 0, timeout: 0) {
                #expect(line == Self.heartbeat)
                heartbeats.append(elapsed)
            }
            if quiet.serverClosed { closedAt = elapsed }
        }
        #expect(heartbeats.count == 1 && heartbeats[0] >= 5 && heartbeats[0] <= 6, "one heartbeat, at 5 s (the walk's floor: 6 s at most): \(heartbeats)")
        #expect(closedAt.map { $0 >= 10 && $0 <= 11 } == true, "closed at 10 s (11 s at most): \(String(describing: closedAt))")
        #expect(!talker.serverClosed, "the talker sent something every 0.25 s")
        #expect(try metric("kvod_idle_closed_total", talker) == "1")
        #expect(try metric("kvod_heartbeats_sent_total", talker) == "1", "the talker never was quiet for 5 s")
        #expect(log.matching("nothing received for 10.0 s").count == 1, "\(log.messages)")
        #expect(server.stopEmbedded().loopClosedCleanly)
    }

    @Test("any bytes begin a new quiet spell: an answer to the heartbeat, a partial line; a silent one still goes")
    func anyBytesKeepAConnection() throws {
        let server = try EmbeddedServer.make(clock: .manual()) { $0.idleTimeout = 4 }
        let answering = server.makeEmbeddedConnection()
        let dribbling = server.makeEmbeddedConnection()
        let silent = server.makeEmbeddedConnection()
        var heartbeats = 0
        // 30 s: the answering client pings back at each heartbeat; the other sends one byte of a line every 3.5 s.
        for step in 1...60 {
            server.advanceTime(by: 0.5)
            for line in answering.takeLines(atLeast: 0, timeout: 0) where line == Self.heartbeat {
                heartbeats += 1
                #expect(try answering.call(#"{"op":"ping"}"#)["ok"] == true)
            }
            if step % 7 == 0 {
                dribbling.send([UInt8(ascii: " ")])
                // Read now, at 3.5 s, as a running loop would (`advanceTime` sweeps before it reads).
                server.step()
            }
        }
        #expect(heartbeats >= 7, "a heartbeat every 2 to 3.5 s, answered: \(heartbeats)")
        #expect(!answering.serverClosed && !dribbling.serverClosed)
        #expect(silent.serverClosed, "sent nothing: closed after 4 s")
        // The partial line was kept all along: completing it is an ordinary request (after the heartbeats it ignored).
        dribbling.send(line: #"{"op":"ping","id":7}"#)
        // Its unread heartbeats come first; a few bounded waits for the reply after them.
        var reply: [JSONValue] = []
        for _ in 0..<5 where reply.isEmpty {
            reply = try dribbling.takeLines(timeout: 1).map { try JSONParser.parse($0) }.filter { $0["event"] == nil }
        }
        #expect(reply.first?["id"] == 7 && reply.first?["ok"] == true, "\(reply); closed: \(dribbling.serverClosed)")
        #expect(server.stopEmbedded().loopClosedCleanly)
    }

    @Test("a vanished client's onDisconnect runs within the idle timeout plus the grace, not before")
    func presenceEndsWithinIdleTimeoutPlusGrace() throws {
        let server = try EmbeddedServer.make(clock: .manual()) { $0.idleTimeout = 6 }
        let observer = server.makeEmbeddedConnection()
        try observer.call(#"{"op":"create","object":"users.ada","values":{"online":true}}"#)
        try observer.call(#"{"op":"observe","object":"users.ada","keyPath":"online","options":["new"]}"#)
        let phone = server.makeEmbeddedConnection()
        try phone.call(#"{"op":"session","grace":2}"#)
        try phone.call(#"{"op":"onDisconnect","request":{"op":"set","object":"users.ada","keyPath":"online","value":false}}"#)
        // The phone's network vanishes: nothing more from it, nothing closed. The observer keeps talking.
        var heard: [JSONValue] = []
        var closedAt: Double?
        var elapsed = 0.0
        while heard.isEmpty, elapsed < 20 {
            server.advanceTime(by: 0.25)
            elapsed += 0.25
            heard += try observer.takeLines(atLeast: 0, timeout: 0).map { try JSONParser.parse($0) }.filter { $0["event"] == "change" }
            #expect(try observer.call(#"{"op":"ping"}"#)["ok"] == true)
            if closedAt == nil, phone.serverClosed { closedAt = elapsed }
        }
        #expect(closedAt.map { $0 >= 6 && $0 <= 7 } == true, "closed at the idle timeout: \(String(describing: closedAt))")
        #expect(elapsed >= 8 && elapsed <= 9, "the action ran at idle timeout + grace, 6 + 2 s (+ the walk's second): \(elapsed)")
        #expect(elapsed == (closedAt ?? 0) + 2, "the grace counts from the close, as for any disconnect")
        #expect(heard.first?["change"]?["new"] == false, "\(heard)")
        #expect(server.stopEmbedded().loopClosedCleanly)
    }

    @Test("WebSocket: a ping frame at half the timeout; the client's pong keeps the connection, silence closes it with 1008")
    func webSocketPingAndPong() throws {
        let server = try EmbeddedServer.make(clock: .manual()) {
            $0.idleTimeout = 4
            $0.http = HTTPConfiguration(port: 0)
        }
        let socket = server.makeEmbeddedConnection(stack: .http(tls: false))
        socket.send(Array("GET /ws HTTP/1.1\r\nHost: 127.0.0.1:\(server.httpPort)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n".utf8)
                    + Array("Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n".utf8))
        let handshake = String(decoding: socket.takeOutput(), as: UTF8.self)
        #expect(handshake.hasPrefix("HTTP/1.1 101"), "\(handshake)")
        let ping: [UInt8] = [0x89, 0x00]
        let pong: [UInt8] = [0x8A, 0x80, 1, 2, 3, 4]  // masked, as a client's frames are; no payload
        var pings: [Double] = []
        var lastPong = 0.0
        var elapsed = 0.0
        while elapsed < 12 {
            server.advanceTime(by: 0.25)
            elapsed += 0.25
            let output = socket.takeOutput()
            guard !output.isEmpty else { continue }
            #expect(output == ping, "\(output)")
            pings.append(elapsed)
            socket.send(pong)
            lastPong = elapsed
        }
        #expect(pings.count >= 3 && !socket.serverClosed, "12 s, kept by its pongs: pings at \(pings)")
        #expect(zip(pings, pings.dropFirst()).allSatisfy { $1 - $0 >= 2 && $1 - $0 <= 3 }, "one per 2 s of quiet: \(pings)")
        // Silent now: one more ping, then the close frame (1008) a timeout after the last pong (read at the next step).
        var output: [UInt8] = []
        var closedAt: Double?
        while closedAt == nil, elapsed < 30 {
            server.advanceTime(by: 0.25)
            elapsed += 0.25
            output += socket.takeOutput()
            if socket.serverClosed { closedAt = elapsed - lastPong }
        }
        #expect(output == ping + [0x88, 0x02, 0x03, 0xF0], "a ping, then close code 1008: \(output)")
        #expect(closedAt.map { $0 >= 4.25 && $0 <= 5.25 } == true, "\(String(describing: closedAt))")
        #expect(server.stopEmbedded().loopClosedCleanly)
    }

    @Test("an HTTP API event stream (SSE) gets a keepalive comment every half timeout and is never closed for its silence; its events end with their revision's id")
    func eventStreamIsOneWay() throws {
        let server = try EmbeddedServer.make(clock: .manual()) {
            $0.idleTimeout = 4
            $0.http = HTTPConfiguration(port: 0)
        }
        let writer = server.makeEmbeddedConnection()
        try writer.call(#"{"op":"create","object":"o","values":{"n":0}}"#)
        let stream = server.makeEmbeddedConnection(stack: .http(tls: false))
        stream.send(Array("GET /v1/objects/o/n HTTP/1.1\r\nHost: 127.0.0.1:\(server.httpPort)\r\nAccept: text/event-stream\r\n\r\n".utf8))
        let head = String(decoding: stream.takeOutput(), as: UTF8.self)
        #expect(head.hasPrefix("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n") && head.hasSuffix(": observing sub 1 at rev 1\n\n"), "\(head)")
        // 20 s of silence from the stream's client, five idle timeouts: a comment at each 2 s, no close.
        var keepalives: [Double] = []
        var elapsed = 0.0
        while elapsed < 20 {
            server.advanceTime(by: 0.25)
            elapsed += 0.25
            let output = String(decoding: stream.takeOutput(), as: UTF8.self)
            if !output.isEmpty {
                expectEqual(output, ": keepalive\n")
                keepalives.append(elapsed)
            }
        }
        #expect(!stream.serverClosed)
        #expect(keepalives.count >= 7 && zip(keepalives, keepalives.dropFirst()).allSatisfy { $1 - $0 >= 2 && $1 - $0 <= 3 }, "\(keepalives)")
        #expect(writer.serverClosed, "an ordinary connection as silent is closed")
        try server.makeEmbeddedConnection().call(#"{"op":"set","object":"o","keyPath":"n","value":1}"#)
        let event = String(decoding: stream.takeOutput(), as: UTF8.self)
        expectEqual(event, "event: change\ndata: {\"event\":\"change\",\"sub\":1,\"object\":\"o\",\"keyPath\":\"n\",\"reason\":\"valueChanged\",\"rev\":2,\"change\":{\"kind\":1,\"new\":1}}\nid: 2\n\n")
        #expect(server.stopEmbedded().loopClosedCleanly)
    }

    @Test("0 turns the idle timeout off; a reload turns it on for every open connection at once, counted from the reload")
    func offAndReloaded() throws {
        let server = try EmbeddedServer.make(clock: .manual()) { $0.idleTimeout = 0 }
        let client = server.makeEmbeddedConnection()
        try client.call(#"{"op":"ping"}"#)
        server.advanceTime(by: 3600)
        #expect(client.takeOutput().isEmpty && !client.serverClosed, "an hour of quiet, off: nothing")
        var fresh = server.configuration
        fresh.idleTimeout = 2
        server.applyLiveSettings(from: fresh)
        var heartbeatAt: Double?
        var closedAt: Double?
        var elapsed = 0.0
        while closedAt == nil, elapsed < 10 {
            server.advanceTime(by: 0.25)
            elapsed += 0.25
            if client.takeLines(atLeast: 0, timeout: 0) == [Self.heartbeat] { heartbeatAt = elapsed }
            if client.serverClosed { closedAt = elapsed }
        }
        #expect(heartbeatAt.map { $0 >= 1 && $0 <= 2 } == true, "the heartbeat a second after the reload: \(String(describing: heartbeatAt))")
        #expect(closedAt.map { $0 >= 2 && $0 <= 3 } == true, "closed 2 s after the reload: \(String(describing: closedAt))")
        #expect(server.stopEmbedded().loopClosedCleanly)
    }
}
