import Foundation
import KVOJSON
import KVOWireProbe
import Testing

@testable import KVOServer
@testable import KVOTestSupport

/// Dead peers noticed in bounded time over real sockets (docs/protocol.md, "Idle connections and heartbeats"): a
/// client whose network is cut by a proxy that drops everything without closing anything has its connection closed
/// by kvod within `--idle-timeout` and its presence session's `onDisconnect` run within the idle timeout plus the
/// grace, once with the in-process server on a manual clock and once with the real kvod on real time; a quiet client
/// that answers heartbeats stays, one that does not is closed after its heartbeat; a client that dribbles bytes of a
/// line is alive. The same behaviour to the millisecond over a socket pair is `IdleTimeoutTests`' (KVOServerTests).
@Suite(.timeLimit(.minutes(1))) struct IdleTimeoutOverTCPTests {
    /// Reads `connection` until a change event arrives (answering heartbeats, as `KVOConnection` does), for at most
    /// `timeout` seconds; nil when none came.
    private func firstChange(_ connection: KVOConnection, timeout: Double) throws -> JSONValue? {
        let deadline = monotonicSeconds() + timeout
        while monotonicSeconds() < deadline {
            // Timed out or closed: no change.
            guard let message = try? connection.readMessage(timeout: max(0.01, deadline - monotonicSeconds())) else { return nil }
            if message["event"] == "change" { return message }
        }
        return nil
    }

    @Test("a client cut by a proxy that drops everything: kvod closes it and its onDisconnect runs within idle timeout + grace",
          arguments: ["blackhole", "partition"])
    func cutClientsActionRunsInBoundedTime(cut: String) throws {
        let server = try KVODProcess(["--idle-timeout", "2"])
        let proxy = try TCPProxy(targetPort: server.port)
        let observer = try server.connect()
        try observer.call("create", ["object": "users.ada", "values": ["online": true]])
        try observer.call("observe", ["object": "users.ada", "keyPath": "online", "options": ["new"]])
        let phone = try KVOConnection(port: proxy.port)
        try phone.call("session", ["grace": 1])
        try phone.call("onDisconnect", ["request": ["op": "set", "object": "users.ada", "keyPath": "online", "value": false]])
        // Neither end is closed: only the idle timeout can tell that the phone is gone.
        let cutAt = monotonicSeconds()
        if cut == "blackhole" { proxy.blackhole() } else { proxy.partition() }
        let change = try firstChange(observer, timeout: 15)
        let took = monotonicSeconds() - cutAt
        #expect(change?["change"]?["new"] == false, "\(String(describing: change))")
        // 2 s of silence, a second at most for the sweep, the 1 s grace, a housekeeping tick: 3 to 4.2 s; generous.
        #expect(took >= 2.9 && took < 7, "the action ran \(took) s after the cut (idle timeout 2 s + grace 1 s)")
        let metrics = try observer.call("metrics")["text"]?.stringValue ?? ""
        #expect(metrics.contains("kvod_idle_closed_total 1\n"), "\(metrics)")
        #expect(server.waitForLog("nothing received for 2.0 s"), "\(server.log)")
        proxy.heal()
    }

    @Test("a quiet client that answers heartbeats stays; one that does not is closed after the heartbeat it was sent")
    func answeringClientsStay() throws {
        let server = try KVODProcess(["--idle-timeout", "2"])
        let answering = try server.connect()
        let mute = try server.connect()
        mute.answersHeartbeats = false
        try answering.call("ping")
        try mute.call("ping")
        let started = monotonicSeconds()
        // Both read side by side for 6 s (three timeouts): the answering one answers each heartbeat with an empty line
        // as it reads it (`KVOConnection.answersHeartbeats`); the mute one gets its heartbeat, then is closed.
        var heartbeats = 0
        var muteHeartbeatAfter: Double?
        var muteClosedAfter: Double?
        while monotonicSeconds() - started < 6 {
            if let message = try? answering.readMessage(timeout: 0.05), KVOConnection.isHeartbeat(message) { heartbeats += 1 }
            guard muteClosedAfter == nil else { continue }
            switch Result(catching: { () throws(KVOClientError) in try mute.readMessage(timeout: 0.05) }) {
            case let .success(message):
                #expect(KVOConnection.isHeartbeat(message) && muteHeartbeatAfter == nil, "\(message)")
                muteHeartbeatAfter = monotonicSeconds() - started
            case .failure(.connectionClosed): muteClosedAfter = monotonicSeconds() - started
            case .failure: break
            }
        }
        #expect(muteHeartbeatAfter.map { $0 >= 0.9 && $0 < 2 } == true, "\(String(describing: muteHeartbeatAfter))")
        #expect(muteClosedAfter.map { $0 >= 1.9 && $0 < 3 } == true, "\(String(describing: muteClosedAfter))")
        #expect(heartbeats >= 3, "a heartbeat every 1 to 1.5 s of quiet, answered: \(heartbeats)")
        #expect(try answering.call("ping")["ok"] == true)
        let settings = try answering.call("config")["settings"]?.arrayValue ?? []
        #expect(settings.contains { $0["name"] == "idle-timeout" && $0["value"] == "2" && $0["source"] == "flag" }, "\(settings)")
    }

    @Test("--idle-timeout from the config file and the environment; SIGHUP turns it on for the open connections")
    func settingAndReload() throws {
        let directory = try TemporaryDirectory("idle-timeout")
        let file = directory.appending("kvod.conf")
        try ConfigurationFileTests.write("idle-timeout = 0\n", to: file)
        let server = try KVODProcess(["--config", file])
        let quiet = try server.connect()
        quiet.answersHeartbeats = false
        try quiet.call("ping")
        #expect((try? quiet.readMessage(timeout: 2.5)) == nil, "off: no heartbeat")
        try ConfigurationFileTests.write("idle-timeout = 1\n", to: file)
        server.send(signal: SIGHUP)
        #expect(server.waitForLog("config reload: idle-timeout"), "\(server.log)")
        let reloadedAt = monotonicSeconds()
        let heartbeat = try quiet.readMessage(timeout: 5)
        #expect(KVOConnection.isHeartbeat(heartbeat), "\(heartbeat)")
        #expect((try? quiet.readMessage(timeout: 5)) == nil)
        let closedAfter = monotonicSeconds() - reloadedAt
        #expect(closedAfter >= 0.9 && closedAfter < 3.5, "closed a timeout after the reload: \(closedAfter) s")
        let fromEnvironment = try KVODProcess(environment: ["KVOD_IDLE_TIMEOUT": "7"])
        let settings = try fromEnvironment.connect().call("config")["settings"]?.arrayValue ?? []
        #expect(settings.contains { $0["name"] == "idle-timeout" && $0["value"] == "7" && $0["source"] == "environment" },
                "\(settings.filter { $0["name"] == "idle-timeout" })")
    }

    @Test("a client that sends a byte of a line every so often is alive (bytes are activity), and bounded by --max-line")
    func dribblingClientIsAliveAndBounded() throws {
        let server = try KVODProcess(["--idle-timeout", "2", "--max-line", "64"])
        let dribbler = try server.connect()
        dribbler.answersHeartbeats = false
        let started = monotonicSeconds()
        var sent = 0
        while monotonicSeconds() - started < 5 {
            try dribbler.send(raw: [UInt8(ascii: " ")])
            sent += 1
            usleep(400_000)
        }
        // Never a complete line in 5 s (2.5 timeouts), and still served.
        try dribbler.send(raw: Array(#"{"op":"ping","id":1}"#.utf8) + [0x0A])
        var reply = try dribbler.readMessage(timeout: 5)
        while KVOConnection.isHeartbeat(reply) { reply = try dribbler.readMessage(timeout: 5) }
        #expect(reply["id"] == 1 && reply["ok"] == true, "\(reply)")
        // What it holds is bounded as any line is: past --max-line it is too_large, and the rest discarded.
        try dribbler.send(raw: [UInt8](repeating: UInt8(ascii: " "), count: 100) + [0x0A])
        reply = try dribbler.readMessage(timeout: 5)
        while KVOConnection.isHeartbeat(reply) { reply = try dribbler.readMessage(timeout: 5) }
        #expect(reply["error"]?["code"] == "too_large", "\(reply) after \(sent) bytes")
    }

    @Test("in-process on a manual clock through a proxy that drops everything: closed at the idle timeout, the action at + grace")
    func manualClockThroughAProxy() throws {
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.clock = .manual()
        configuration.idleTimeout = 30
        configuration.firstRequestTimeout = 0
        let server = try Server(configuration: configuration)
        let proxy = try TCPProxy(targetPort: server.port)
        let observer = server.makeEmbeddedConnection()
        /// Sends `line` on the observer and steps the server until its reply (events before it are kept in `events`).
        var events: [JSONValue] = []
        func call(_ line: String) throws -> JSONValue {
            observer.send(line: line)
            while true {
                for message in try observer.takeLines().map({ try JSONParser.parse($0) }) {
                    if message["ok"] != nil { return message }
                    events.append(message)
                }
            }
        }
        _ = try call(#"{"op":"create","object":"users.ada","values":{"online":true}}"#)
        _ = try call(#"{"op":"observe","object":"users.ada","keyPath":"online","options":["new"]}"#)
        let phone = try KVOConnection(port: proxy.port)
        /// Sends `request` on the phone (through the proxy) and steps the server until the reply is back.
        func phoneCall(_ request: JSONValue) throws -> JSONValue {
            try phone.send(request)
            let deadline = monotonicSeconds() + 10
            while monotonicSeconds() < deadline {
                server.step()
                if let reply = try? phone.readMessage(timeout: 0.002) { return reply }
            }
            throw KVOClientError.timedOut
        }
        #expect(try phoneCall(["op": "session", "grace": 5])["ok"] == true)
        #expect(try phoneCall(["op": "onDisconnect", "request": ["op": "set", "object": "users.ada", "keyPath": "online",
                                                                  "value": false]])["ok"] == true)
        #expect(server.connectionCount == 2)
        proxy.blackhole()
        // 40 s of the server's time, a quarter second a step; the observer keeps talking.
        var closedAt: Double?
        var ranAt: Double?
        var elapsed = 0.0
        while ranAt == nil, elapsed < 40 {
            server.advanceTime(by: 0.25)
            elapsed += 0.25
            _ = try call(#"{"op":"ping"}"#)
            if closedAt == nil, server.connectionCount == 1 { closedAt = elapsed }
            if events.contains(where: { $0["change"]?["new"] == false }) { ranAt = elapsed }
        }
        #expect(closedAt.map { $0 >= 30 && $0 <= 31 } == true, "kvod closed the cut connection at \(String(describing: closedAt)) s")
        #expect(ranAt.map { $0 == closedAt.map { $0 + 5 } } == true, "the action ran at \(String(describing: ranAt)) s: closed + grace")
        #expect(server.stopEmbedded().loopClosedCleanly)
    }
}
