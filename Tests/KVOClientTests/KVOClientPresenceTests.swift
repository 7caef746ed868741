import Foundation
import KVOClient
import KVOJSON
import KVOWireProbe
import Testing

@testable import KVOTestSupport

/// KVOClient's presence (docs/protocol.md, "Presence") against the real kvod: a session resumed by the
/// library across a cut connection (nothing runs), typed `onDisconnect` writes and an ephemeral create that run
/// once the client is gone, and `onSessionLost` when a reconnection finds the session ended.
@Suite struct KVOClientPresenceTests {
    /// A client of `server` through `proxy` (whose connections the test cuts) that reconnects after `delay` s.
    private func client(of server: KVODProcess, through proxy: TCPProxy, reconnectingAfter delay: Double) async throws -> KVOClient {
        var configuration = server.clientConfiguration()
        configuration.port = proxy.port
        configuration.reconnection = KVOClient.ReconnectionPolicy(initialDelay: delay, maximumDelay: delay + 0.15, jitter: 0)
        return try await KVOClient.connect(to: configuration)
    }

    @Test func aSessionSurvivesACutAndEndsWhenTheClientIsGone() async throws {
        let server = try KVODProcess()
        let proxy = try TCPProxy(targetPort: server.port)
        let kvod = try await client(of: server, through: proxy, reconnectingAfter: 0.05)
        let observer = try server.connect()
        try observer.call("create", ["object": "users.ada", "values": ["online": false, "visits": 0]])
        let session = try await kvod.startSession(grace: .seconds(3))
        #expect(session.grace == .seconds(3) && session.id.count == 32)
        try await kvod.set("online", of: "users.ada", to: true)
        expectEqual(try await kvod.onDisconnect(.set("online", of: "users.ada", to: false)), 1)
        expectEqual(try await kvod.onDisconnect(batch: [.increment("visits", of: "users.ada", by: 1)]), 2)
        try await kvod.create("cursors.ada", values: ["x": 1], ephemeral: true)
        // Cut: the library reconnects and resumes the session before anything else; nothing runs.
        proxy.cut()
        // A ping may still go out on the cut connection (lost with it): the next one is on the new connection.
        var pinged = false
        for _ in 0..<100 where !pinged {
            pinged = (try? await kvod.ping()) != nil
            if !pinged { try await Task.sleep(nanoseconds: 50_000_000) }
        }
        #expect(pinged && proxy.connectionCount >= 2)
        expectEqual(kvod.session, session)
        // Resumed: the server holds the session attached (no grace running), so nothing can run; that a resumed
        // session runs nothing when its grace would have ended is `ManualClockServerTests`' (no waiting for it here).
        let metrics = try observer.call("metrics")["text"]?.stringValue ?? ""
        #expect(metrics.contains(#"kvod_sessions{state="attached"} 1"#) && metrics.contains(#"kvod_sessions{state="detached"} 0"#),
                "\(metrics)")
        expectEqual(try observer.call("get", ["object": "users.ada"])["value"], ["online": true, "visits": 0])
        // Gone for good: after the grace both actions and the ephemeral deletion run once.
        try observer.call("observe", ["object": "users.ada", "keyPath": "online", "options": ["new"]])
        kvod.close()
        let event = try observer.nextEvent(timeout: 15)
        expectEqual(event?["change"]?["new"], false, "\(String(describing: event))")
        expectEqual(try observer.call("get", ["object": "users.ada"])["value"], ["online": false, "visits": 1])
        expectEqual(try observer.request("get", ["object": "cursors.ada"])["error"]?["code"], "not_found")
    }

    @Test func aSilentServerIsNoticedAndTheSessionResumedOnANewConnection() async throws {
        let server = try KVODProcess()
        let proxy = try TCPProxy(targetPort: server.port)
        var configuration = server.clientConfiguration()
        configuration.port = proxy.port
        configuration.heartbeatInterval = 0.3
        configuration.heartbeatTimeout = 0.3
        configuration.reconnection = KVOClient.ReconnectionPolicy(initialDelay: 0.05, maximumDelay: 0.2, jitter: 0)
        let kvod = try await KVOClient.connect(to: configuration)
        defer { kvod.close() }
        let observer = try server.connect()
        try observer.call("create", ["object": "users.ada", "values": ["online": true]])
        let session = try await kvod.startSession(grace: .seconds(30))
        try await kvod.onDisconnect(.set("online", of: "users.ada", to: false))
        // The proxy drops everything and closes nothing: only the client's heartbeat can tell.
        proxy.blackhole()
        var pinged = false
        for _ in 0..<200 where !pinged {
            if proxy.connectionCount >= 2 { pinged = (try? await kvod.ping()) != nil }
            if !pinged { try await Task.sleep(nanoseconds: 50_000_000) }
        }
        #expect(pinged, "reconnected on its own")
        #expect(kvod.session == session, "and resumed its session")
        let metrics = try observer.call("metrics")["text"]?.stringValue ?? ""
        #expect(metrics.contains(#"kvod_sessions{state="attached"} 1"#), "\(metrics)")
        #expect(try observer.call("get", ["object": "users.ada", "keyPath": "online"])["value"] == true, "nothing ran")
    }

    @Test func aReconnectionThatFindsTheSessionEndedCallsOnSessionLost() async throws {
        let server = try KVODProcess()
        let proxy = try TCPProxy(targetPort: server.port)
        // Back after 0.6 s at the earliest: a session with no grace is over by then.
        let kvod = try await client(of: server, through: proxy, reconnectingAfter: 0.6)
        defer { kvod.close() }
        try await kvod.create("counter", values: ["n": 0])
        let session = try await kvod.startSession(grace: .zero)
        try await kvod.onDisconnect(.increment("n", of: "counter"))
        let (lost, sink) = AsyncStream<KVOSession>.makeStream()
        kvod.onSessionLost { sink.yield($0) }
        proxy.cut()
        var iterator = lost.makeAsyncIterator()
        expectEqual(await iterator.next(), session)
        expectEqual(kvod.session, nil)
        expectEqual(try await kvod.get("n", of: "counter", as: Int.self).value, 1)
        do {
            try await kvod.onDisconnect(.increment("n", of: "counter"))
            Issue.record("no session: refused")
        } catch let KVODError.server(code, _, _) {
            expectEqual(code, .badRequest)
        }
        await #expect(throws: KVODError.self) { try await kvod.endSession() }
    }

    /// Issue 43, "sessions that follow a phone": a client back after its grace hears at once (on the reconnection,
    /// before anything queued) that its session ended, and the README's recipe registers it again: a new session,
    /// its ephemeral presence object made again, and its cursor signals heard by the room's observers.
    @Test func aClientBackAfterItsGraceRegistersAgainAtOnce() async throws {
        let server = try KVODProcess()
        let proxy = try TCPProxy(targetPort: server.port)
        let kvod = try await client(of: server, through: proxy, reconnectingAfter: 0.6)
        defer { kvod.close() }
        let room = try server.connect()
        try room.call("observe", ["pattern": "online.*"])
        @Sendable func present() async throws {
            try await kvod.startSession(grace: .zero)
            try await kvod.create("online.ada", values: ["name": "Ada"], ephemeral: true)
        }
        try await present()
        let first = try #require(kvod.session)
        let (registered, sink) = AsyncStream<KVOSession>.makeStream()
        kvod.onSessionLost { _ in
            Task {
                try await present()
                if let session = kvod.session { sink.yield(session) }
            }
        }
        #expect(try room.nextEvent(timeout: 10)?["reason"] == "created")
        let cut = Date()
        proxy.cut()
        // Gone (grace 0): kvod deletes the presence object at once, long before the client is back.
        let gone = try room.nextEvent(timeout: 10)
        #expect(gone?["object"] == "online.ada" && gone?["reason"] == "sourceDeleted", "\(String(describing: gone))")
        var iterator = registered.makeAsyncIterator()
        let second = await iterator.next()
        // Told on the reconnection itself, not at a later request: the test sends nothing between the cut and the
        // notice, so only the reconnection (0.6 s after the cut at the earliest) can have told it. No upper bound in
        // seconds: on a loaded machine a reconnection can take longer, and that is not what is tested.
        let took = Date().timeIntervalSince(cut)
        #expect(took >= 0.6, "\(took) s")
        #expect(second != nil && second != first)
        let back = try room.nextEvent(timeout: 10)
        #expect(back?["object"] == "online.ada" && back?["reason"] == "created", "\(String(describing: back))")
        // Its cursor, as a signal on its own presence object.
        try await kvod.signal("online.ada", ["x": 120, "y": 48])
        let cursor = try room.nextEvent(timeout: 10)
        #expect(cursor?["reason"] == "signal" && cursor?["object"] == "online.ada" && cursor?["change"]?["new"] == ["x": 120, "y": 48],
                "\(String(describing: cursor))")
    }
}
