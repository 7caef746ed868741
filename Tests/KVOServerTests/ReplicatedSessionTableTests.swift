import Testing
@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer
import KVOJSON

/// The replicated session table of cluster mode (docs/design.md, "Presence", *Sessions as replicated state*),
/// without NATS: attachments and their epochs, deadlines from apply times only, records and snapshots that
/// carry the replicated fields, and the stream's active time (publishers' marks) stored with its integrity state.
@Suite("replicated sessions")
struct ReplicatedSessionTableTests {
    private let id = "0123456789abcdef0123456789abcdef"

    @Test("an attachment's detach counts only while it is the last; deadlines come from apply times")
    func attachmentsAndDeadlines() throws {
        var table = SessionTable(recordsChanges: true)
        _ = try table.beginReplicated(id, user: "ada", grace: 1_000, holder: "n1.a", epoch: 10)
        _ = try table.addAction(Array(#"{"op":"set","object":"o","keyPath":"v","value":1}"#.utf8), toSession: id)
        // Held: its holder's last apply time + the window + the grace.
        expectEqual(table.session(id)?.replicatedDeadline(holderTime: 50_000, window: 5_000), 56_000)
        // Resumed on n2 at 12: n1's detach of epoch 10 changes nothing.
        let (_, takenFrom) = try table.attachReplicated(id, user: "ada", grace: nil, holder: "n2.b", epoch: 12)
        expectEqual(takenFrom, nil)
        table.detachReplicated(id, epoch: 10, at: 60_000)
        expectEqual(table.session(id)?.holder, "n2.b")
        // n2's detach of epoch 12: its grace after the detach's apply time, whatever any holder does.
        table.detachReplicated(id, epoch: 12, at: 61_000)
        expectEqual(table.session(id)?.holder, nil)
        expectEqual(table.session(id)?.replicatedDeadline(holderTime: 99_000, window: 5_000), 62_000)
        expectEqual(table.dueReplicated(now: 61_999, window: 5_000) { _ in nil }.map(\.id), [])
        expectEqual(table.dueReplicated(now: 62_000, window: 5_000) { _ in nil }.map(\.id), [id])
        // Another user's resume is not_found, as for an id that never was.
        #expect(throws: KVOError.self) { _ = try table.attachReplicated(id, user: "bob", grace: nil, holder: "n3.c", epoch: 13) }
    }

    @Test("a connection bound here lets go when another connection resumes the session")
    func bindingIsLocal() throws {
        var table = SessionTable(recordsChanges: true)
        _ = try table.beginReplicated(id, user: nil, grace: 1_000, holder: "n1.a", epoch: 3)
        table.bind(id, to: ConnectionID(7, slot: 7))
        expectEqual(table.sessionID(of: ConnectionID(7, slot: 7)), id)
        expectEqual(table.unheld(by: "n1.a").count, 0)
        let (_, takenFrom) = try table.attachReplicated(id, user: nil, grace: 2_000, holder: "n2.b", epoch: 4)
        expectEqual(takenFrom, ConnectionID(7, slot: 7))
        expectEqual(table.sessionID(of: ConnectionID(7, slot: 7)), nil)
        expectEqual(table.session(id)?.grace, 2_000)
    }

    @Test("records and snapshots carry holder, epoch and detach time; publishers their apply times")
    func recordsAndSnapshots() throws {
        var held = PresenceSession(id: id, user: "ada", grace: 1_500, connection: ConnectionID(2, slot: 2))
        held.holder = "n1.x"
        held.epoch = 42
        let restored = try #require(PresenceSession(id: id, record: held.record))
        expectEqual(restored.holder, "n1.x")
        expectEqual(restored.epoch, 42)
        var detached = held
        detached.holder = nil
        detached.detachedAt = 1_795_000_000_000
        expectEqual(PresenceSession(id: id, record: detached.record)?.detachedAt, 1_795_000_000_000)
        // A single node's record has none of them, as before.
        let single = PresenceSession(id: id, user: nil, grace: 0, connection: nil)
        expectEqual(single.record["epoch"], nil)
        var snapshot = ClusterSnapshot(engine: KVOEngine(), users: UserDirectory([]), sequence: 5,
                                       sessions: [id: held.record])
        let decoded = try ClusterSnapshot.decode(snapshot.encoded())
        expectEqual(decoded.presenceSessions.map(\.holder), ["n1.x"])
        snapshot.sessions[id] = .object(["grace": "no"])
        #expect(throws: ClusterSnapshotError.self) { _ = try ClusterSnapshot.decode(snapshot.encoded()) }
        let integrity = StreamIntegrity()
        var entry = ReplicationEntry(version: KVOEngine.replicationVersion, node: "n1", batch: "n1.x.1", operations: [],
                                     publisherSequence: 1)
        entry.time = 1_000
        integrity.applied(entry, data: [], at: 1, time: 1_000)
        entry.batch = "n1.x.2"
        entry.publisherSequence = 2
        integrity.applied(entry, data: [], at: 2, time: 1_400)
        expectEqual(integrity.lastHeard("n1.x"), 400, "the stream's active time after it")
        let state = try #require(StreamIntegrity.decodeState(integrity.encodedState))
        expectEqual(StreamIntegrity(state).lastHeard("n1.x"), 400)
    }
}

extension ReplicatedSessionTableTests {
    @Test("the stream's active time counts a gap between entries 2 s at most: an outage ends nobody's session")
    func activeTimeCapsGaps() throws {
        let integrity = StreamIntegrity()
        func apply(_ counter: UInt64, at time: Int64) {
            var entry = ReplicationEntry(version: KVOEngine.replicationVersion, node: "n1", batch: "n1.x.\(counter)",
                                         operations: [], publisherSequence: counter)
            entry.time = time
            integrity.applied(entry, data: [], at: counter, time: time)
        }
        apply(1, at: 10_000)
        apply(2, at: 10_700)
        expectEqual(integrity.state.activeTime, 700)
        // 60 s without an entry (no quorum): 2 s of active time.
        apply(3, at: 70_700)
        expectEqual(integrity.state.activeTime, 2_700)
        expectEqual(integrity.lastHeard("n1.x"), 2_700)
        expectEqual(integrity.activeTime(at: 70_900), 2_900)
        expectEqual(integrity.activeTime(at: 99_000), 4_700)
        expectEqual(StreamIntegrity.decodeState(integrity.encodedState)?.activeTime, 2_700)
    }
}
