import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Persistence, revisions and loss-free resume against the real kvod: acknowledged writes survive
/// SIGKILL, a restart restores objects and the revision counter, `observe` with `sinceRev` replays
/// exactly what a subscriber missed (after a dropped connection and across restarts) or sends one
/// `resync`, and `kvoclient subscribe` resumes across a restart without losing or repeating a line.
@Suite("durability and resume")
struct DurabilityTests {
    // MARK: - Persistence

    @Test("every acknowledged set survives SIGKILL and revisions continue", arguments: ["normal", "full"])
    func acknowledgedSetsSurviveSIGKILL(sync: String) throws {
        let directory = try TemporaryDirectory("sigkill-\(sync)")
        let server = try KVODProcess(["--sync", sync], dataDirectory: directory.appending("data"))
        try server.connect().call("create", ["object": "counters"])
        let writerCount = 4
        let acknowledged = AcknowledgementLog(writers: writerCount)
        let writers = DispatchGroup()
        for writer in 0..<writerCount {
            writers.enter()
            let port = server.port
            Thread.detachNewThread {
                defer { writers.leave() }
                acknowledged.runWriter(writer, port: port)
            }
        }
        // Kill kvod while every writer is in the middle of its stream of sets.
        let busy = acknowledged.wait(timeout: 60) { $0.allSatisfy { $0.value >= 25 } }
        #expect(busy, "writers did not get going: \(acknowledged.snapshot)")
        server.stop(signal: SIGKILL)
        expectEqual(writers.wait(timeout: .now() + 20), .success, "a writer did not notice that kvod died")
        #expect(acknowledged.unexpectedErrors.isEmpty, "\(acknowledged.unexpectedErrors)")

        let restarted = try server.restart(after: SIGKILL)
        let client = try restarted.connect()
        let stored = try client.call("get", ["object": "counters"])
        let last = acknowledged.snapshot
        for (writer, entry) in last.enumerated() {
            let value = try #require(stored["value"]?["w\(writer)"]?.intValue, "w\(writer) is missing: \(stored)")
            // One set at a time per writer: at most one unacknowledged value beyond the last acknowledged.
            #expect((entry.value...(entry.value + 1)).contains(value),
                    "w\(writer): stored \(value), last acknowledged \(entry.value) at rev \(entry.rev)")
        }
        let highestAcknowledged = last.map(\.rev).max() ?? 0
        let current = try #require(stored["rev"]?.intValue)
        #expect(current >= highestAcknowledged)
        #expect(current <= highestAcknowledged + Int64(writerCount), "rev \(current) after at most \(writerCount) unacknowledged sets")
        let next = try #require(try client.call("set", ["object": "counters", "keyPath": "after", "value": true])["rev"]?.intValue)
        expectEqual(next, current + 1)
        #expect(next > highestAcknowledged)
    }

    @Test("a clean restart restores every object and the revision counter exactly", arguments: ["off", "normal", "full"])
    func restartRestoresObjectsAndRevision(sync: String) throws {
        let directory = try TemporaryDirectory("restore-\(sync)")
        let server = try KVODProcess(["--sync", sync], dataDirectory: directory.appending("data"))
        let client = try server.connect()
        try client.call("create", ["object": "person", "values": [
            "name": "Ada", "age": 36, "height": 1.65, "retired": false, "spouse": .null,
            "address": ["city": "London", "lines": ["12 St James's Square", "Zürich \"quoted\" \\ \n"]],
            "employer": ["$ref": "company"],
        ]])
        try client.call("create", ["object": "company", "values": ["name": "Analytical Engines", "staff": []]])
        try client.call("create", ["object": "gone", "values": ["x": 1]])
        try client.call("insert", ["object": "company", "keyPath": "staff", "values": ["ada", "charles", "mary"]])
        try client.call("remove", ["object": "company", "keyPath": "staff", "index": 1])
        try client.call("replace", ["object": "company", "keyPath": "staff", "index": 0, "value": ["first": "Ada"]])
        try client.call("set", ["object": "person", "keyPath": "address.city", "value": "Paris"])
        try client.call("set", ["object": "person", "keyPath": "age", "value": 37])
        try client.call("delete", ["object": "gone"])
        let before = try snapshot(client)
        expectEqual(before.revision, 9)

        let restarted = try server.restart(after: SIGTERM)
        let after = try snapshot(try restarted.connect())
        expectEqual(after.objects, before.objects)
        expectEqual(after.revision, before.revision)
        let next = try restarted.connect().call("set", ["object": "person", "keyPath": "age", "value": 38])
        expectEqual(next["rev"], .int(before.revision + 1))
    }

    @Test("kvod without --data keeps its data in ./kvod-data; --in-memory writes nothing")
    func defaultDataDirectoryAndInMemory() throws {
        let directory = try TemporaryDirectory("default")
        let persistent = try KVODProcess(storage: .serverDefault, workingDirectory: directory.path)
        try persistent.connect().call("create", ["object": "kept", "values": ["v": 1]])
        let restarted = try persistent.restart(after: SIGTERM)
        expectEqual(try restarted.connect().call("get", ["object": "kept", "keyPath": "v"])["value"], 1)
        restarted.stop()
        expectEqual(try FileManager.default.contentsOfDirectory(atPath: directory.path), ["kvod-data"])

        let scratch = try TemporaryDirectory("in-memory")
        let volatile = try KVODProcess(storage: .inMemory, workingDirectory: scratch.path)
        try volatile.connect().call("create", ["object": "lost"])
        let empty = try volatile.restart(after: SIGTERM)
        expectEqual(try empty.connect().call("list")["objects"], [])
        empty.stop()
        expectEqual(try FileManager.default.contentsOfDirectory(atPath: scratch.path), [])
    }

    @Test("a second kvod on the same data directory fails at startup; the first keeps serving")
    func secondServerOnSameDataDirectoryFails() throws {
        let directory = try TemporaryDirectory("locked")
        let first = try KVODProcess(dataDirectory: directory.appending("data"))
        try first.connect().call("create", ["object": "o"])
        let error = #expect(throws: KVODProcessError.self) {
            _ = try KVODProcess(dataDirectory: directory.appending("data"))
        }
        if case let .exitedEarly(status, _) = error { #expect(status != 0) }
        expectEqual(try first.connect().call("list")["objects"], ["o"])
    }

    // MARK: - Resume with sinceRev

    @Test("a dropped subscriber resumes with sinceRev: the stream is complete, in order, without duplicates")
    func resumeAfterDroppedConnection() throws {
        let subject = try KVODProcess()
        try ResumeScenario(subject: subject).run { scenario in
            try scenario.write(operations: 10)  // sent to the subscriber, never read
            scenario.subscriber.close()
            try scenario.write(operations: 20)  // while it is away
            return subject
        }
    }

    @Test("a subscriber resumes from persisted history across a kvod restart", arguments: [SIGTERM, SIGKILL])
    func resumeAcrossRestart(signal: Int32) throws {
        let directory = try TemporaryDirectory("resume-restart")
        let subject = try KVODProcess(dataDirectory: directory.appending("data"))
        try ResumeScenario(subject: subject).run { scenario in
            try scenario.write(operations: 20)  // sent to the subscriber, never read
            let restarted = try subject.restart(after: signal)
            try scenario.writeThrough(try restarted.connect())
            try scenario.write(operations: 10)  // after the restart, before the subscriber is back
            return restarted
        }
    }

    @Test("a deletion replayed from persisted history ends the observation with sourceDeleted", arguments: [false, true])
    func deletionReplayedAfterRestart(restart: Bool) throws {
        let directory = try TemporaryDirectory("replay-delete")
        let server = try KVODProcess(dataDirectory: directory.appending("data"))
        let writer = try server.connect()
        try writer.call("create", ["object": "b", "values": ["name": "B0"]])  // rev 1
        try writer.call("set", ["object": "b", "keyPath": "name", "value": "B1"])  // rev 2
        try writer.call("delete", ["object": "b"])  // rev 3
        try writer.call("create", ["object": "b", "values": ["name": "reborn"]])  // rev 4
        let resumeOn = restart ? try server.restart(after: SIGTERM) : server
        let observer = try resumeOn.connect()
        let reply = try observer.observe(object: "b", keyPath: "name", options: ["old", "new"], sinceRev: 1)
        expectEqual(reply.rev, 4)
        func event(_ reason: JSONValue, _ rev: JSONValue, old: JSONValue, new: JSONValue) -> JSONValue {
            ["event": "change", "sub": .int(reply.sub), "object": "b", "keyPath": "name", "reason": reason, "rev": rev,
             "change": ["kind": 1, "old": old, "new": new]]
        }
        expectEqual(try observer.nextEvent(), event("valueChanged", 2, old: "B0", new: "B1"))
        expectEqual(try observer.nextEvent(), event("sourceDeleted", 3, old: "B1", new: .null))
        // The observation has ended: a later write to the re-created object sends nothing to it.
        try resumeOn.connect().call("set", ["object": "b", "keyPath": "name", "value": "later"])
        try observer.call("ping")
        #expect(observer.pendingEvents.isEmpty, "\(observer.pendingEvents)")
        expectEqual(try observer.call("info", ["object": "b"])["observers"], [])
    }

    @Test("--history 10: an older sinceRev gets exactly one resync event with the current value, then live events")
    func resyncWhenHistoryIsTooShort() throws {
        let server = try KVODProcess(["--history", "10"])
        let writer = try server.connect()
        try writer.call("create", ["object": "doc", "values": ["n": 0]])
        for value in 1...50 {
            try writer.call("set", ["object": "doc", "keyPath": "n", "value": .int(Int64(value))])
        }
        let current: Int64 = 51

        // Too old: one resync (carrying `new` although only `old` was asked), then live events.
        let stale = try server.connect()
        let reply = try stale.observe(object: "doc", keyPath: "n", options: ["old"], sinceRev: 1)
        expectEqual(reply.rev, current)
        #expect(try stale.nextEvent() == [
            "event": "change", "sub": .int(reply.sub), "object": "doc", "keyPath": "n", "reason": "resync",
            "rev": .int(current), "change": ["kind": 1, "new": 50],
        ])
        try writer.call("set", ["object": "doc", "keyPath": "n", "value": 51])
        #expect(try stale.nextEvent() == [
            "event": "change", "sub": .int(reply.sub), "object": "doc", "keyPath": "n", "reason": "valueChanged",
            "rev": .int(current + 1), "change": ["kind": 1, "old": 50],
        ])

        // Beyond the current revision (the data was wiped, say): resync too, and no initial event.
        let future = try server.connect()
        let futureReply = try future.observe(object: "doc", keyPath: "n", options: ["initial", "new"], sinceRev: 1000)
        #expect(try future.nextEvent() == [
            "event": "change", "sub": .int(futureReply.sub), "object": "doc", "keyPath": "n", "reason": "resync",
            "rev": .int(current + 1), "change": ["kind": 1, "new": 51],
        ])

        // Recent enough: the missed changes with their own revisions, no resync.
        let recent = try server.connect()
        let recentReply = try recent.observe(object: "doc", keyPath: "n", options: ["initial", "new", "old"], sinceRev: current - 4)
        expectEqual(recentReply.rev, current + 1)
        for value in Int64(47)...51 {
            let event = try #require(try recent.nextEvent())
            expectEqual(event["reason"], "valueChanged")
            expectEqual(event["rev"], .int(value + 1))
            expectEqual(event["change"], ["kind": 1, "old": .int(value - 1), "new": .int(value)])
        }
        try writer.call("set", ["object": "doc", "keyPath": "n", "value": 52])
        let live = try #require(try recent.nextEvent())
        expectEqual(live["rev"], .int(current + 2))
        expectEqual(live["change"], ["kind": 1, "old": 51, "new": 52])
        #expect(try future.nextEvent() == [
            "event": "change", "sub": .int(futureReply.sub), "object": "doc", "keyPath": "n", "reason": "valueChanged",
            "rev": .int(current + 2), "change": ["kind": 1, "new": 52],
        ])
    }

    @Test("sinceRev equal to the current revision replays nothing and sends no initial event")
    func sinceRevAtCurrentRevision() throws {
        let server = try KVODProcess()
        let writer = try server.connect()
        try writer.call("create", ["object": "doc", "values": ["n": 0]])
        try writer.call("set", ["object": "doc", "keyPath": "n", "value": 1])
        let observer = try server.connect()
        let reply = try observer.observe(object: "doc", keyPath: "n", options: ["initial", "new"], sinceRev: 2)
        expectEqual(reply.rev, 2)
        try writer.call("set", ["object": "doc", "keyPath": "n", "value": 2])
        #expect(try observer.nextEvent() == [
            "event": "change", "sub": .int(reply.sub), "object": "doc", "keyPath": "n", "reason": "valueChanged",
            "rev": 3, "change": ["kind": 1, "new": 2],
        ])
    }

    // MARK: - kvoclient subscribe

    @Test("kvoclient subscribe across a kvod restart prints every change exactly once, in order", arguments: [SIGTERM, SIGKILL])
    func subscribeResumesAcrossRestart(signal: Int32) throws {
        let directory = try TemporaryDirectory("cli-restart")
        let server = try KVODProcess(dataDirectory: directory.appending("data"))
        let writer = try server.connect()
        try writer.call("create", ["object": "doc", "values": ["n": 0]])
        let subscriber = try KVOClientProcess.start(server, ["subscribe", "doc", "n", "--options", "old,new", "--count", "30"])
        try waitForObservers(writer, object: "doc", count: 1)
        func expectedLine(_ value: Int) -> String { "doc.n  valueChanged  rev=\(value + 1)  old=\(value - 1)  new=\(value)" }
        var lines: [String] = []
        for value in 1...10 {
            try writer.call("set", ["object": "doc", "keyPath": "n", "value": .int(Int64(value))])
            if value <= 5, let line = subscriber.nextLine() { lines.append(line) }
        }
        // Sets 6 to 10 are acknowledged; whether they reached the subscriber before kvod stopped is
        // up to the timing, and must not matter.
        // Stopped (SIGSTOP), the subscriber cannot reconnect before sets 11 to 20: they reach it only
        // through the replay.
        subscriber.send(signal: SIGSTOP)
        let restarted = try server.restart(after: signal)
        let restartedWriter = try restarted.connect()
        for value in 11...20 {
            try restartedWriter.call("set", ["object": "doc", "keyPath": "n", "value": .int(Int64(value))])
        }
        subscriber.send(signal: SIGCONT)
        #expect(subscriber.nextErrorLine()
            == "kvoclient: lost the connection to 127.0.0.1:\(server.port) (the server closed the connection); reconnecting")
        let reconnected = subscriber.nextErrorLine() ?? "(none)"
        #expect(reconnected.hasPrefix("kvoclient: reconnected to 127.0.0.1:\(server.port); resuming n after rev "), "\(reconnected)")
        for value in 21...30 {
            try restartedWriter.call("set", ["object": "doc", "keyPath": "n", "value": .int(Int64(value))])
        }
        while lines.count < 30, let line = subscriber.nextLine() { lines.append(line) }
        expectEqual(lines, (1...30).map(expectedLine))
        let result = subscriber.finish()
        expectEqual(result.status, 0)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.isEmpty)
    }

    @Test("kvoclient subscribe notices a server that stopped answering (heartbeat) and resumes when it answers again")
    func subscribeHeartbeatDetectsASilentServer() throws {
        let server = try KVODProcess()
        let writer = try server.connect()
        try writer.call("create", ["object": "doc", "values": ["n": 0]])
        let subscriber = try KVOClientProcess.start(server, [
            "subscribe", "doc", "n", "--options", "old,new", "--count", "2", "--heartbeat", "0.5",
        ])
        try waitForObservers(writer, object: "doc", count: 1)
        try writer.call("set", ["object": "doc", "keyPath": "n", "value": 1])
        expectEqual(subscriber.nextLine(), "doc.n  valueChanged  rev=2  old=0  new=1")
        // A stopped kvod keeps the TCP connection open but answers nothing: only the heartbeat can tell.
        server.send(signal: SIGSTOP)
        let lost = subscriber.nextErrorLine(timeout: 5)
        server.send(signal: SIGCONT)
        expectEqual(lost, "kvoclient: lost the connection to 127.0.0.1:\(server.port) (timed out waiting for the server); reconnecting")
        let reconnected = subscriber.nextErrorLine() ?? "(none)"
        #expect(reconnected.hasPrefix("kvoclient: reconnected to 127.0.0.1:\(server.port); resuming n after rev 2"), "\(reconnected)")
        try writer.call("set", ["object": "doc", "keyPath": "n", "value": 2])
        expectEqual(subscriber.nextLine(), "doc.n  valueChanged  rev=3  old=1  new=2")
        expectEqual(subscriber.finish().status, 0)
    }

    @Test("kvoclient subscribe --options prior resumes prior notifications too, each once")
    func subscribeResumesPriorNotifications() throws {
        let directory = try TemporaryDirectory("cli-prior")
        let server = try KVODProcess(dataDirectory: directory.appending("data"))
        let writer = try server.connect()
        try writer.call("create", ["object": "doc", "values": ["n": 0]])
        let subscriber = try KVOClientProcess.start(server, [
            "subscribe", "doc", "n", "--options", "prior,old,new", "--count", "12",
        ])
        try waitForObservers(writer, object: "doc", count: 1)
        var lines: [String] = []
        for value in 1...3 {
            try writer.call("set", ["object": "doc", "keyPath": "n", "value": .int(Int64(value))])
            for _ in 0..<2 { lines += [subscriber.nextLine()].compactMap { $0 } }
        }
        // Stopped (SIGSTOP), the subscriber cannot reconnect before the next sets: they reach it only
        // through the replay.
        subscriber.send(signal: SIGSTOP)
        let restarted = try server.restart(after: SIGKILL)
        let restartedWriter = try restarted.connect()
        for value in 4...6 {
            try restartedWriter.call("set", ["object": "doc", "keyPath": "n", "value": .int(Int64(value))])
        }
        subscriber.send(signal: SIGCONT)
        while lines.count < 12, let line = subscriber.nextLine() { lines.append(line) }
        #expect(lines == (1...6).flatMap { value in [
            "doc.n  valueChanged  prior  rev=\(value + 1)  old=\(value - 1)",
            "doc.n  valueChanged  rev=\(value + 1)  old=\(value - 1)  new=\(value)",
        ] })
        expectEqual(subscriber.finish().status, 0)
    }

    @Test("kvoclient subscribe prints a resync line when the restarted kvod's history does not reach back")
    func subscribePrintsResync() throws {
        // A data directory whose revision (3) is behind what the subscriber will have seen (5).
        let directory = try TemporaryDirectory("cli-resync")
        let other = try KVODProcess(dataDirectory: directory.appending("other"))
        let otherWriter = try other.connect()
        try otherWriter.call("create", ["object": "doc", "values": ["n": 100]])
        try otherWriter.call("set", ["object": "doc", "keyPath": "n", "value": 101])
        try otherWriter.call("set", ["object": "doc", "keyPath": "n", "value": 102])
        other.stop()

        let server = try KVODProcess(dataDirectory: directory.appending("data"))
        let writer = try server.connect()
        try writer.call("create", ["object": "doc", "values": ["n": 0]])
        let subscriber = try KVOClientProcess.start(server, ["subscribe", "doc", "n", "--options", "old,new", "--count", "6"])
        try waitForObservers(writer, object: "doc", count: 1)
        for value in 1...4 {
            try writer.call("set", ["object": "doc", "keyPath": "n", "value": .int(Int64(value))])
            expectEqual(subscriber.nextLine(), "doc.n  valueChanged  rev=\(value + 1)  old=\(value - 1)  new=\(value)")
        }
        server.stop(signal: SIGKILL)
        #expect(subscriber.nextErrorLine()
            == "kvoclient: lost the connection to 127.0.0.1:\(server.port) (the server closed the connection); reconnecting")
        let replacement = try KVODProcess(dataDirectory: directory.appending("other"), port: server.port)
        expectEqual(subscriber.nextLine(), "doc.n  resync  rev=3  new=102")
        expectEqual(subscriber.nextErrorLine(), "kvoclient: reconnected to 127.0.0.1:\(server.port); resuming n after rev 5")
        try replacement.connect().call("set", ["object": "doc", "keyPath": "n", "value": 103])
        expectEqual(subscriber.nextLine(), "doc.n  valueChanged  rev=4  old=102  new=103")
        let result = subscriber.finish()
        expectEqual(result.status, 0)
        #expect(result.stdout.isEmpty)
    }

    // MARK: - Helpers

    /// Every object and the current revision, read through `list`, `get` and `ping`.
    private func snapshot(_ client: KVOConnection) throws -> (objects: [String: JSONValue], revision: Int64) {
        var objects: [String: JSONValue] = [:]
        var revision: Int64 = -1
        for id in try client.call("list")["objects"]?.arrayValue ?? [] {
            let name = try #require(id.stringValue)
            let reply = try client.call("get", ["object": .string(name)])
            objects[name] = reply["value"]
            revision = try #require(reply["rev"]?.intValue)
        }
        return (objects, revision)
    }
}

/// The last acknowledged set of each writer thread of the SIGKILL test.
private final class AcknowledgementLog: @unchecked Sendable {
    struct Entry: CustomStringConvertible {
        var value: Int64 = 0
        var rev: Int64 = 0
        var description: String { "\(value)@\(rev)" }
    }

    private let lock = NSCondition()
    private var entries: [Entry]
    private var errors: [String] = []

    init(writers: Int) {
        entries = Array(repeating: Entry(), count: writers)
    }

    var snapshot: [Entry] {
        lock.lock()
        defer { lock.unlock() }
        return entries
    }

    /// Failures other than losing the connection to kvod.
    var unexpectedErrors: [String] {
        lock.lock()
        defer { lock.unlock() }
        return errors
    }

    /// Sets `w<writer>` on `counters` to 1, 2, 3... one at a time, recording each acknowledgement,
    /// until the connection fails (kvod was killed). Revisions must increase.
    func runWriter(_ writer: Int, port: Int) {
        do {
            let connection = try KVOConnection(port: port)
            var value: Int64 = 1
            while true {
                let reply = try connection.call("set", ["object": "counters", "keyPath": .string("w\(writer)"), "value": .int(value)])
                guard let rev = reply["rev"]?.intValue else { throw KVOClientError.malformedMessage("\(reply)") }
                lock.lock()
                if rev <= entries[writer].rev { errors.append("w\(writer): rev \(rev) after \(entries[writer].rev)") }
                entries[writer] = Entry(value: value, rev: rev)
                lock.broadcast()
                lock.unlock()
                value += 1
            }
        } catch let error as KVOClientError where error.isConnectionLoss {
            return
        } catch {
            lock.lock()
            errors.append("w\(writer): \(error)")
            lock.broadcast()
            lock.unlock()
        }
    }

    /// Waits until `condition` holds for the entries (true) or `timeout` seconds pass (false).
    func wait(timeout: Double, until condition: ([Entry]) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        lock.lock()
        defer { lock.unlock() }
        while !condition(entries) {
            if !errors.isEmpty || !lock.wait(until: deadline) { return condition(entries) }
        }
        return true
    }
}
