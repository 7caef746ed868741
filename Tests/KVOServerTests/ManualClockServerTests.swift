import Foundation
import KVOJSON
import Logging
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// Time-based behaviour driven in-process with a manual clock (`ServerClock.manual()`, turned by
/// `Server.advanceTime(by:)`): ttl and expiry, reads that never see an expired object, presence graces, the
/// first-request and login timeouts, a rate window and the group commit's cadence. No test here sleeps: the clock
/// moves only when a test turns it, so each deadline is checked to the millisecond on either side. The same
/// behaviour over real time and TCP, a few end-to-end cases, is the `*OverTCPTests` suites'.
@Suite struct ManualClockServerTests {
    /// The objects `list` answers.
    private func objects(_ client: EmbeddedConnection) throws -> JSONValue? { try client.call(#"{"op":"list"}"#)["objects"] }

    @Test("an object expires when the clock reaches its deadline, to the millisecond, and its observers hear why")
    func expiryAtTheDeadline() throws {
        let clock = ServerClock.manual()
        let server = try EmbeddedServer.make(clock: clock)
        let writer = server.makeEmbeddedConnection()
        let observer = server.makeEmbeddedConnection()
        try writer.call(#"{"op":"create","object":"sess:1","values":{"user":"ada"},"ttl":3}"#)
        let sub = try observer.call(#"{"op":"observe","object":"sess:1","keyPath":"user","options":["new","old"]}"#)["sub"]
        let ids = try observer.call(#"{"op":"observe","pattern":"sess:*"}"#)["sub"]
        server.advanceTime(by: 2.999)
        #expect(observer.takeOutput().isEmpty, "nothing before the deadline")
        expectEqual(try writer.call(#"{"op":"get","object":"sess:1","keyPath":"user"}"#)["value"], "ada")
        server.advanceTime(by: 0.001)
        let heard = try observer.takeLines(atLeast: 2).map { try JSONParser.parse($0) }
        expectEqual(heard.map { $0["sub"] }, [sub, ids], "\(heard)")
        #expect(heard.allSatisfy { $0["reason"] == "sourceDeleted" && $0["cause"] == "expired" }, "\(heard)")
        expectEqual(heard.first?["change"]?["old"], "ada")
        expectEqual(try writer.call(#"{"op":"get","object":"sess:1"}"#)["error"]?["code"], "not_found")
        #expect(server.stopEmbedded().loopClosedCleanly)
    }

    @Test("writes and touch move the deadline to the write's time plus the ttl; ttl 0 ends the expiry")
    func writesAndTouchKeepAnObjectAlive() throws {
        let clock = ServerClock.manual()
        let server = try EmbeddedServer.make(clock: clock)
        let client = server.makeEmbeddedConnection()
        try client.call(#"{"op":"create","object":"kept","values":{"n":0},"ttl":1.5}"#)
        try client.call(#"{"op":"create","object":"touched","values":{},"ttl":1.5}"#)
        try client.call(#"{"op":"create","object":"forever","values":{},"ttl":1.5}"#)
        try client.call(#"{"op":"set","object":"forever","keyPath":"n","value":1,"ttl":0}"#)
        for step in 1...20 {
            server.advanceTime(by: 0.2)
            try client.call(#"{"op":"set","object":"kept","keyPath":"n","value":\#(step)}"#)
            let touched = try client.call(#"{"op":"touch","object":"touched"}"#)
            expectEqual(touched["expiresAt"], .int(clock.wallMilliseconds + 1500), "the touch's time plus the ttl: \(touched)")
        }
        expectEqual(try objects(client), ["forever", "kept", "touched"], "4 s of writes and touches every 0.2 s")
        expectEqual(try client.call(#"{"op":"touch","object":"forever"}"#)["expiresAt"], .null)
        server.advanceTime(by: 1.499)
        expectEqual(try objects(client), ["forever", "kept", "touched"])
        server.advanceTime(by: 0.001)
        expectEqual(try objects(client), ["forever"], "left alone, kept and touched expire 1.5 s after their last write")
        // In a batch: the ttl goes with its part, all or nothing.
        let refused = try client.call(#"{"op":"batch","ops":[{"op":"create","object":"b1","values":{},"ttl":0.2},{"op":"create","object":"forever","values":{}}]}"#)
        expectEqual(refused["error"]?["code"], "exists")
        try client.call(#"{"op":"batch","ops":[{"op":"create","object":"b1","values":{},"ttl":0.2}]}"#)
        server.advanceTime(by: 0.199)
        expectEqual(try objects(client), ["b1", "forever"])
        server.advanceTime(by: 0.001)
        expectEqual(try objects(client), ["forever"])
        #expect(server.stopEmbedded().loopClosedCleanly)
    }

    @Test("no read sees an object past its deadline, whether or not housekeeping ran since")
    func readsNeverSeeAnExpiredObject() throws {
        let clock = ServerClock.manual()
        let server = try EmbeddedServer.make(clock: clock)
        let client = server.makeEmbeddedConnection()
        let observer = server.makeEmbeddedConnection()
        try client.call(#"{"op":"create","object":"a","values":{"n":1},"ttl":1}"#)
        try client.call(#"{"op":"create","object":"b","values":{"n":2},"ttl":1}"#)
        try client.call(#"{"op":"create","object":"c","values":{"n":3},"ttl":1}"#)
        try client.call(#"{"op":"create","object":"keep","values":{}}"#)
        try observer.call(#"{"op":"observe","pattern":"*"}"#)
        // The clock alone moves (no housekeeping tick, no loop iteration): the next request still finds them gone.
        clock.advance(nanoseconds: 1_000_000_000)
        expectEqual(try client.call(#"{"op":"get","object":"a"}"#)["error"]?["code"], "not_found")
        expectEqual(try objects(client), ["keep"])
        // Every object due went before that first request: a create finds the id free.
        expectEqual(try client.call(#"{"op":"create","object":"b","values":{"n":20}}"#)["ok"], true)
        expectEqual(try client.call(#"{"op":"get","object":"b","keyPath":"n"}"#)["value"], 20)
        let heard = try observer.takeLines(atLeast: 4).map { try JSONParser.parse($0) }
        #expect(heard.filter { $0["cause"] == "expired" }.compactMap { $0["object"]?.stringValue }.sorted() == ["a", "b", "c"],
                "\(heard)")
        #expect(server.stopEmbedded().loopClosedCleanly)
    }

    @Test("a backlog of due objects is expired in bounded steps; a request waits for it rather than read one or stall the loop")
    func anExpiryBacklogIsWorkedOffInSteps() throws {
        let clock = ServerClock.manual()
        let server = try EmbeddedServer.make(clock: clock)
        let client = server.makeEmbeddedConnection()
        let other = server.makeEmbeddedConnection()
        // Four steps and a quarter of objects with one deadline (a client could make a million), made 500 at a time.
        let step = Server.maximumExpiriesPerStep
        let total = 4 * step + step / 4
        for chunk in stride(from: 0, to: total, by: 500) {
            let lines = (chunk..<min(chunk + 500, total)).map { #"{"op":"create","object":"o:\#($0)","values":{"i":\#($0)},"ttl":1}"# }
            client.send(Array(lines.joined(separator: "\n").utf8) + [0x0A])
            expectEqual(client.takeLines(atLeast: lines.count).count, lines.count)
        }
        try client.call(#"{"op":"create","object":"keep","values":{}}"#)
        expectEqual(server.handler.engine.expiringObjectCount, total)
        // The clock alone moves past the deadline (no housekeeping tick).
        clock.advance(nanoseconds: 1_000_000_000)
        client.send(line: #"{"op":"get","object":"o:\#(total - 1)","id":1}"#)
        other.send(line: #"{"op":"ping","id":2}"#)
        // One iteration: a step before each request, which is then held, and one in the check phase. Two steps'
        // work per request at most, never the whole backlog in one stall; nothing is answered yet.
        server.step()
        #expect(server.handler.engine.expiringObjectCount == total - 3 * step,
                "steps of \(step): \(server.handler.engine.expiringObjectCount) left")
        expectEqual(server.heldInput.expiryHolds.count, 2, "both requests wait for the backlog")
        // The next iteration: one step in the check phase; they still wait.
        server.step()
        expectEqual(server.handler.engine.expiringObjectCount, total - 4 * step)
        expectEqual(server.heldInput.expiryHolds.count, 2)
        // The next iteration expires the rest, then answers both: the object is gone.
        let reply = try JSONParser.parse(try #require(client.takeLines().first))
        #expect(reply["id"] == 1 && reply["error"]?["code"] == "not_found", "\(reply)")
        expectEqual(try JSONParser.parse(try #require(other.takeLines().first))["id"], 2)
        expectEqual(server.handler.engine.expiringObjectCount, 0)
        expectEqual(try objects(client), ["keep"])
        // Reading resumed on both connections.
        expectEqual(try other.call(#"{"op":"get","object":"keep"}"#)["ok"], true)
        #expect(server.stopEmbedded().loopClosedCleanly)
    }

    @Test("an object whose ttl ended while the server was stopped is gone before the first request")
    func expiredWhileStopped() throws {
        let scratch = TemporaryDirectory()
        var storage = StorageConfiguration(directory: scratch.appending("data"))
        // No cadence: with the clock standing still, a write within the interval of the last commit would wait for
        // the test to turn it (`groupCommitCadence` below).
        storage.groupCommitIntervalMicroseconds = 0
        let start: Int64 = 1_767_225_600_000
        let first = try EmbeddedServer.make(clock: .manual(wallMilliseconds: start), storage: storage)
        let client = first.makeEmbeddedConnection()
        try client.call(#"{"op":"create","object":"soon","values":{},"ttl":1.5}"#)
        try client.call(#"{"op":"create","object":"later","values":{},"ttl":3600}"#)
        let later = try client.call(#"{"op":"get","object":"later"}"#)["expiresAt"]
        client.close()
        #expect(first.stopEmbedded().loopClosedCleanly)

        // Two seconds later by the wall clock: `soon` is gone as the server starts, before any housekeeping tick.
        let second = try EmbeddedServer.make(clock: .manual(wallMilliseconds: start + 2000), storage: storage)
        expectEqual(second.engine.objectCount, 1, "expired at start-up")
        let again = second.makeEmbeddedConnection()
        expectEqual(try again.call(#"{"op":"get","object":"soon"}"#)["error"]?["code"], "not_found")
        expectEqual(try again.call(#"{"op":"get","object":"later"}"#)["expiresAt"], later, "the other deadline kept")
        again.close()
        #expect(second.stopEmbedded().loopClosedCleanly)
        // And the expiry was stored: a third start finds nothing to expire.
        let third = try EmbeddedServer.make(clock: .manual(wallMilliseconds: start + 2000), storage: storage)
        expectEqual(third.engine.objectCount, 1)
        #expect(third.stopEmbedded().loopClosedCleanly)
    }

    @Test("a session's grace ends to the millisecond: its onDisconnect actions run and its ephemeral objects go")
    func presenceGraceEnds() throws {
        let server = try EmbeddedServer.make(clock: .manual())
        let observer = server.makeEmbeddedConnection()
        try observer.call(#"{"op":"create","object":"host","values":{"online":true}}"#)
        let client = server.makeEmbeddedConnection()
        try client.call(#"{"op":"session","grace":1}"#)
        try client.call(#"{"op":"onDisconnect","request":{"op":"set","object":"host","keyPath":"online","value":false}}"#)
        try client.call(#"{"op":"create","object":"cursor","values":{"x":1},"ephemeral":true}"#)
        try observer.call(#"{"op":"observe","object":"host","keyPath":"online","options":["new"]}"#)
        client.close()
        server.step()
        server.advanceTime(by: 0.999)
        #expect(observer.takeOutput().isEmpty, "nothing before the grace")
        expectEqual(try observer.call(#"{"op":"get","object":"cursor","keyPath":"x"}"#)["value"], 1)
        server.advanceTime(by: 0.001)
        let heard = try observer.takeLines().map { try JSONParser.parse($0) }
        expectEqual(heard.first?["change"]?["new"], false, "\(heard)")
        expectEqual(try observer.call(#"{"op":"get","object":"cursor"}"#)["error"]?["code"], "not_found")
        server.advanceTime(by: 60)
        #expect(observer.takeOutput().isEmpty, "once")
        #expect(server.stopEmbedded().loopClosedCleanly)
    }

    @Test("an onDisconnect action an older kvod stored with a null member runs after a restart, as it was accepted")
    func legacyStoredActionRuns() throws {
        let scratch = TemporaryDirectory()
        var storage = StorageConfiguration(directory: scratch.appending("data"))
        storage.groupCommitIntervalMicroseconds = 0
        let first = try EmbeddedServer.make(clock: .manual(), storage: storage)
        let client = first.makeEmbeddedConnection()
        try client.call(#"{"op":"create","object":"host","values":{"online":true}}"#)
        try client.call(#"{"op":"session","grace":1}"#)
        try client.call(#"{"op":"onDisconnect","request":{"op":"set","object":"host","keyPath":"online","value":false}}"#)
        #expect(first.stopEmbedded().loopClosedCleanly)
        // What a kvod from before strict requests stored for a client that sent `"ttl": null` (and a null condition).
        let database = try SQLiteDatabase(path: SQLiteStore.databasePath(inDirectory: storage.directory), create: false)
        try database.exec(#"UPDATE sessions SET record = replace(record, '"op":"set"', '"op":"set","ttl":null,"ifRev":null')"#)
        let second = try EmbeddedServer.make(clock: .manual(), storage: storage)
        let observer = second.makeEmbeddedConnection()
        expectEqual(try observer.call(#"{"op":"get","object":"host","keyPath":"online"}"#)["value"], true)
        second.advanceTime(by: 1)
        #expect(try observer.call(#"{"op":"get","object":"host","keyPath":"online"}"#)["value"] == false,
                "the stored action ran when the restored session's grace ended")
        #expect(second.stopEmbedded().loopClosedCleanly)
    }

    @Test("a session resumed within its grace runs nothing; its next grace ends it once")
    func resumedWithinGrace() throws {
        let server = try EmbeddedServer.make(clock: .manual())
        let observer = server.makeEmbeddedConnection()
        try observer.call(#"{"op":"create","object":"p","values":{"n":0}}"#)
        let first = server.makeEmbeddedConnection()
        let id = try #require(try first.call(#"{"op":"session","grace":2}"#)["session"]?.stringValue)
        try first.call(#"{"op":"onDisconnect","request":{"op":"increment","object":"p","keyPath":"n"}}"#)
        first.close()
        server.step()
        server.advanceTime(by: 1.999)
        let second = server.makeEmbeddedConnection()
        let resumed = try second.call(#"{"op":"session","resume":"\#(id)"}"#)
        #expect(resumed["resumed"] == true && resumed["actions"] == 1, "\(resumed)")
        server.advanceTime(by: 60)
        expectEqual(try observer.call(#"{"op":"get","object":"p","keyPath":"n"}"#)["value"], 0, "resumed: nothing ran")
        second.close()
        server.step()
        server.advanceTime(by: 1.999)
        expectEqual(try observer.call(#"{"op":"get","object":"p","keyPath":"n"}"#)["value"], 0)
        server.advanceTime(by: 0.001)
        expectEqual(try observer.call(#"{"op":"get","object":"p","keyPath":"n"}"#)["value"], 1, "ran at the end of the grace")
        server.advanceTime(by: 60)
        expectEqual(try observer.call(#"{"op":"get","object":"p","keyPath":"n"}"#)["value"], 1, "once")
        let late = server.makeEmbeddedConnection()
        expectEqual(try late.call(#"{"op":"session","resume":"\#(id)"}"#)["error"]?["code"], "not_found")
        #expect(server.stopEmbedded().loopClosedCleanly)
    }

    @Test("the first-request timeout closes a silent connection at its deadline and spares one that spoke")
    func firstRequestTimeout() throws {
        let server = try EmbeddedServer.make(clock: .manual()) { $0.firstRequestTimeout = 5 }
        let silent = server.makeEmbeddedConnection()
        let talker = server.makeEmbeddedConnection()
        expectEqual(try talker.call(#"{"op":"ping"}"#)["ok"], true)
        server.advanceTime(by: 4.999)
        #expect(!silent.serverClosed && server.connectionCount == 2)
        server.advanceTime(by: 0.001)
        server.step()
        #expect(silent.serverClosed, "closed at 5 s")
        #expect(!talker.serverClosed && server.connectionCount == 1)
        expectEqual(try talker.call(#"{"op":"ping"}"#)["ok"], true)
        #expect(server.stopEmbedded().loopClosedCleanly)
    }

    @Test("with users, the login timeout closes a connection that did not log in, and spares one that did")
    func loginTimeout() throws {
        let scratch = TemporaryDirectory()
        let usersFile = try Self.usersFile(in: scratch)
        let server = try EmbeddedServer.make(clock: .manual(), usersFile: usersFile) { $0.loginTimeout = 10 }
        let idle = server.makeEmbeddedConnection()
        let member = server.makeEmbeddedConnection()
        expectEqual(try idle.call(#"{"op":"ping"}"#)["ok"], true, "a ping is not a login")
        expectEqual(try member.call(#"{"op":"auth","user":"alice","password":"correct horse"}"#)["ok"], true)
        server.advanceTime(by: 9.999)
        #expect(!idle.serverClosed)
        server.advanceTime(by: 0.001)
        server.step()
        #expect(idle.serverClosed, "closed at 10 s")
        #expect(!member.serverClosed)
        expectEqual(try member.call(#"{"op":"list"}"#)["ok"], true)
        #expect(server.stopEmbedded().loopClosedCleanly)
    }

    @Test("failed logins are logged once a second at most: the rest are summed up when the window has passed")
    func authenticationFailureLogWindow() throws {
        let scratch = TemporaryDirectory()
        let usersFile = try Self.usersFile(in: scratch)
        let log = CapturedLog()
        var logger = Logger(label: "kvod-test") { _ in CapturingLogHandler(log: log) }
        logger.logLevel = .debug
        let server = try EmbeddedServer.make(clock: .manual(), usersFile: usersFile, logger: logger)
        let client = server.makeEmbeddedConnection()
        for _ in 0..<3 {
            expectEqual(try client.call(#"{"op":"auth","user":"alice","password":"wrong"}"#)["error"]?["code"], "unauthenticated")
        }
        expectEqual(log.matching("authentication failed").count, 1, "\(log.messages)")
        server.advanceTime(by: 0.999)
        #expect(log.matching("more authentication failures").isEmpty, "\(log.messages)")
        server.advanceTime(by: 0.001)
        #expect(log.matching("more authentication failures") == ["2 more authentication failures within a second of the last one logged; not logged one by one"],
                "\(log.messages)")
        // The window has passed: the next failure is logged at once.
        expectEqual(try client.call(#"{"op":"auth","user":"alice","password":"wrong"}"#)["error"]?["code"], "unauthenticated")
        expectEqual(log.matching("authentication failed").count, 2, "\(log.messages)")
        #expect(server.stopEmbedded().loopClosedCleanly)
    }

    @Test("group commit cadence: a pipelined write within the interval is held until the interval has passed")
    func groupCommitCadence() throws {
        let scratch = TemporaryDirectory()
        var storage = StorageConfiguration(directory: scratch.appending("data"))
        storage.groupCommitIntervalMicroseconds = 1_000_000
        let server = try EmbeddedServer.make(clock: .manual(), storage: storage)
        let writer = server.makeEmbeddedConnection()
        try writer.call(#"{"op":"create","object":"doc","values":{"n":0}}"#)
        server.advanceTime(by: 2)
        #expect(try writer.call(#"{"op":"set","object":"doc","keyPath":"n","value":1}"#)["ok"] == true,
                "a write after a quiet spell is committed and answered at once")
        writer.send(Array(#"{"op":"set","id":2,"object":"doc","keyPath":"n","value":2}"#.utf8) + [0x0A]
                    + Array(#"{"op":"set","id":3,"object":"doc","keyPath":"n","value":3}"#.utf8) + [0x0A])
        #expect(writer.takeOutput().isEmpty, "held: the last commit started less than the interval ago")
        server.advanceTime(by: 0.999)
        #expect(writer.takeOutput().isEmpty, "still held")
        server.advanceTime(by: 0.001)
        let replies = try writer.takeLines(atLeast: 2).map { try JSONParser.parse($0) }
        #expect(replies.map { $0["id"] } == [2, 3] && replies.allSatisfy { $0["ok"] == true }, "\(replies)")
        #expect(server.stopEmbedded().loopClosedCleanly)
    }

    /// A users file with alice (password "correct horse", read and write on everything).
    private static func usersFile(in scratch: TemporaryDirectory) throws -> String {
        let users = UserDirectory()
        try users.add(UserRecord(name: "alice", passwordHash: try PasswordHasher.hash("correct horse", cost: .minimal),
                                 rules: [try AccessRule(argument: "*=read,write")]))
        let path = scratch.appending("users.json")
        try UsersFile.save(users, to: path)
        return path
    }
}

/// The messages a server logged, for tests of what it logs. Any thread (a lock).
final class CapturedLog: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [String] = []

    var messages: [String] { lock.withLock { stored } }

    func append(_ message: String) { lock.withLock { stored.append(message) } }

    /// The messages that contain `text`.
    func matching(_ text: String) -> [String] { messages.filter { $0.contains(text) } }
}

/// A log handler that keeps each message in a `CapturedLog`.
struct CapturingLogHandler: LogHandler {
    let log: CapturedLog
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .debug

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) { log.append(event.message.description) }
}
