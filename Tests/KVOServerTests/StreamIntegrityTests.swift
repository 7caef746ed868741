import Testing
@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer
import KVOJSON

/// `StreamIntegrity` without NATS: a publisher's batches are admitted once and in order (a repeat is a
/// duplicate, a skipped number a gap), the running hash depends on every byte and id applied and on their
/// order, checkpoint claims make a node the minority only when most claims differ from its own, its own
/// batches' acknowledged and delivered sequences are compared, and the state round-trips through its
/// stored form and a snapshot; a replicator never leaves a gap in its publisher sequence.
@Suite("stream integrity")
struct StreamIntegrityTests {
    private func entry(_ batch: String, _ counter: UInt64?, line: String = #"{"op":"create","object":"o"}"#) -> ReplicationEntry {
        ReplicationEntry(version: KVOEngine.replicationVersion, node: String(batch.prefix { $0 != "." }), batch: batch,
                         operations: [.init(line: Array(line.utf8), user: nil)], publisherSequence: counter)
    }

    /// Admits and applies `entries` at sequences 1, 2, …; the verdicts.
    private func feed(_ integrity: StreamIntegrity, _ entries: [ReplicationEntry]) -> [StreamIntegrity.Verdict] {
        var verdicts: [StreamIntegrity.Verdict] = []
        for (offset, entry) in entries.enumerated() {
            let verdict = integrity.admit(entry, at: UInt64(offset + 1))
            verdicts.append(verdict)
            if verdict == .apply { integrity.applied(entry, data: entry.encoded(), at: UInt64(offset + 1)) } else { integrity.passed(batch: entry.batch) }
        }
        return verdicts
    }

    @Test("entries carry their publisher sequence and checkpoints; the publisher is the batch id without its counter")
    func entryFields() throws {
        var checkpoint = entry("check.a.16", nil)
        checkpoint.operations = []
        checkpoint.checkpoint = .init(sequence: 16, hash: String(repeating: "ab", count: 32))
        expectEqual(try ReplicationEntry.decode(checkpoint.encoded()), checkpoint)
        let batch = entry("a.k3j.7", 7)
        expectEqual(try ReplicationEntry.decode(batch.encoded()), batch)
        expectEqual(batch.publisher, "a.k3j")
        #expect(throws: ReplicationEntryError.self) { try ReplicationEntry.decode(Array(#"{"v":3,"node":"a","batch":"a.x.1","ops":[],"pseq":0}"#.utf8)) }
        #expect(throws: ReplicationEntryError.self) { try ReplicationEntry.decode(Array(#"{"v":3,"node":"a","batch":"a.x.1","ops":[],"check":{"seq":4}}"#.utf8)) }
    }

    @Test("a repeated batch is a duplicate, a skipped number a gap; publishers are independent; old entries pass")
    func identity() {
        let integrity = StreamIntegrity()
        let verdicts = feed(integrity, [entry("a.x.1", 1), entry("b.y.1", 1), entry("a.x.2", 2), entry("a.x.1", 1),
                                        entry("b.y.2", 2), entry("a.x.2", 2), entry("legacy.z.9", nil)])
        expectEqual(verdicts, [.apply, .apply, .apply, .duplicate(firstAt: 3), .apply, .duplicate(firstAt: 3), .apply])
        expectEqual(integrity.duplicatesSkipped, 2)
        guard case .gap = integrity.admit(entry("a.x.4", 4), at: 8) else {
            Issue.record("number 4 after 2 is not a gap")
            return
        }
        guard case .gap = integrity.admit(entry("c.w.2", 2), at: 8) else {
            Issue.record("an unknown publisher's number 2 is not a gap while the publishers are complete")
            return
        }
        expectEqual(integrity.admit(entry("c.w.1", 1), at: 8), .apply)
        // A node that started from an older store does not know every publisher: it takes what comes.
        let unknowing = StreamIntegrity(.unknown(applied: 50))
        expectEqual(unknowing.admit(entry("c.w.2", 2), at: 51), .apply)
        expectEqual(unknowing.uncheckedBatches, 1)
        #expect(!unknowing.state.knowsChain)
    }

    @Test("the running hash depends on every id, byte and their order; nodes that applied the same agree")
    func chain() {
        let a = entry("a.x.1", 1), b = entry("b.y.1", 1, line: #"{"op":"create","object":"p"}"#)
        let first = StreamIntegrity(), second = StreamIntegrity(), reordered = StreamIntegrity(), renamed = StreamIntegrity()
        _ = feed(first, [a, b])
        _ = feed(second, [a, b])
        _ = feed(reordered, [b, a])
        var other = b
        other.batch = "b.y2.1"
        _ = feed(renamed, [a, other])
        expectEqual(first.chainHex, second.chainHex)
        #expect(first.chainHex != reordered.chainHex)
        #expect(first.chainHex != renamed.chainHex)
        #expect(first.chainHex != StreamIntegrity.hex([UInt8](repeating: 0, count: 32)))
        // Duplicates and checkpoints are passed, not chained.
        let withDuplicate = StreamIntegrity()
        _ = feed(withDuplicate, [a, a, b])
        expectEqual(withDuplicate.chainHex, first.chainHex)
        expectEqual(withDuplicate.state.lastBatch, "b.y.1")
    }

    @Test("checkpoints: a node is the minority only when more claims differ from its hash than agree")
    func checkpoints() {
        let integrity = StreamIntegrity()
        _ = feed(integrity, [entry("a.x.1", 1)])
        let own = integrity.chainHex
        let other = String(repeating: "0f", count: 32)
        expectEqual(integrity.recordCheckpoint(at: 16, node: "n1"), nil)
        expectEqual(integrity.claim(.init(sequence: 16, hash: other), from: "n2", node: "n1"), nil, "one against one: no majority")
        expectEqual(integrity.claim(.init(sequence: 16, hash: own), from: "n1", node: "n1"), nil, "its own claim is not counted twice")
        let minority = integrity.claim(.init(sequence: 16, hash: other), from: "n3", node: "n1")
        expectEqual(minority?.contains("n2, n3"), true, "\(minority ?? "nil")")
        expectEqual(integrity.majorityHash(at: 16), other)
        expectEqual(integrity.checkpointDisagreements, 2)
        // Claims heard before the node reaches the sequence are judged when it does.
        let late = StreamIntegrity()
        _ = feed(late, [entry("a.x.1", 1)])
        expectEqual(late.claim(.init(sequence: 32, hash: other), from: "n2", node: "n1"), nil)
        expectEqual(late.claim(.init(sequence: 32, hash: other), from: "n3", node: "n1"), nil)
        #expect(late.recordCheckpoint(at: 32, node: "n1") != nil)
        // Claims from ever more names are bounded: past 64 claimants a checkpoint hears no new one.
        let flooded = StreamIntegrity()
        _ = feed(flooded, [entry("a.x.1", 1)])
        expectEqual(flooded.recordCheckpoint(at: 16, node: "n1"), nil)
        for index in 0..<1000 { _ = flooded.claim(.init(sequence: 16, hash: other), from: "forged\(index)", node: "n1") }
        expectEqual(flooded.checkpointDisagreements, UInt64(StreamIntegrity.maximumClaimants))
        // --cluster-checkpoint-every below 16 is refused (a checkpoint round must not fill the interval).
        #expect(ClusterConfiguration(servers: ["nats://127.0.0.1:4222"], node: "a", checkpointEvery: 15).problem != nil)
        expectEqual(ClusterConfiguration(servers: ["nats://127.0.0.1:4222"], node: "a", checkpointEvery: 16).problem, nil)
        // Agreement is counted.
        let agreeing = StreamIntegrity()
        _ = feed(agreeing, [entry("a.x.1", 1)])
        expectEqual(agreeing.recordCheckpoint(at: 16, node: "n1"), nil)
        expectEqual(agreeing.claim(.init(sequence: 16, hash: own), from: "n2", node: "n1"), nil)
        expectEqual(agreeing.checkpointsAgreed, 1)
    }

    @Test("its own batch: the acknowledged and delivered sequences must be equal, whichever comes first")
    func ownBatches() {
        let integrity = StreamIntegrity()
        expectEqual(integrity.acknowledged("a.x.1", at: 5), nil)
        expectEqual(integrity.deliveredOwnBatch("a.x.1", at: 5), nil)
        expectEqual(integrity.deliveredOwnBatch("a.x.2", at: 7), nil)
        expectEqual(integrity.acknowledged("a.x.2", at: 6)?.contains("acknowledged by JetStream at stream sequence 6 but delivered to it at 7"), true)
        expectEqual(integrity.acknowledged("a.x.3", at: 9), nil)
        #expect(integrity.deliveredOwnBatch("a.x.3", at: 8) != nil)
    }

    @Test("the state round-trips through its stored form and a snapshot; an unknown chain stays unknown")
    func stateRoundTrips() throws {
        let integrity = StreamIntegrity()
        _ = feed(integrity, [entry("a.x.1", 1), entry("b.y.1", 1), entry("a.x.2", 2)])
        expectEqual(StreamIntegrity.decodeState(integrity.encodedState), integrity.state)
        expectEqual(StreamIntegrity.decodeState(StreamIntegrity(.unknown(applied: 3)).encodedState), .unknown(applied: 3))
        expectEqual(StreamIntegrity.decodeState(Array(#"{"last":"a","chain":"zz","publishers":{},"complete":true}"#.utf8)), nil)
        let snapshot = ClusterSnapshot(sequence: 3, revision: 2, lastBindingID: 0, objects: [:], classes: [:], bindings: [:],
                                       users: [], integrity: integrity.state)
        expectEqual(try ClusterSnapshot.decode(snapshot.encoded()).integrity, integrity.state)
    }

    @Test("apply times never go back in stream order: a late entry stamped earlier is applied at the time before it")
    func applyTimeIsNonDecreasing() throws {
        let integrity = StreamIntegrity()
        func apply(_ batch: String, _ counter: UInt64, stamped: Int64?, at sequence: UInt64, clock: Int64 = 5) -> Int64 {
            var stamped_ = entry(batch, counter)
            stamped_.time = stamped
            let time = integrity.applyTime(of: stamped_, fallback: clock)
            #expect(integrity.admit(stamped_, at: sequence) == .apply)
            integrity.applied(stamped_, data: stamped_.encoded(), at: sequence, time: stamped == nil ? nil : time)
            return time
        }
        #expect(apply("a.x.1", 1, stamped: 1_000, at: 1) == 1_000)
        #expect(apply("b.y.1", 1, stamped: 2_000, at: 2) == 2_000, "a later stamp is taken as it is")
        // Stamped at 1,500 on a node cut from NATS, appended after b's 2,000: applied at 2,000.
        #expect(apply("a.x.2", 2, stamped: 1_500, at: 3) == 2_000)
        #expect(integrity.state.applyTime == 2_000)
        // An older kvod's entry has no stamp: this node's clock, which no later entry inherits.
        #expect(apply("c.z.1", 1, stamped: nil, at: 4, clock: 9_999) == 9_999)
        #expect(integrity.state.applyTime == 2_000, "a node's own clock never becomes the stream's time")
        #expect(apply("b.y.2", 2, stamped: 2_100, at: 5) == 2_100)
        // Stored and carried by snapshots, so a restarted node or one that installed a snapshot computes the same.
        let restored = try #require(StreamIntegrity.decodeState(integrity.encodedState))
        #expect(restored.applyTime == 2_100 && restored == integrity.state)
        let snapshot = ClusterSnapshot(sequence: 5, revision: 5, lastBindingID: 0, objects: [:], classes: [:], bindings: [:],
                                       users: [], integrity: integrity.state)
        #expect(try ClusterSnapshot.decode(snapshot.encoded()).integrity?.applyTime == 2_100)
        var late = entry("a.x.3", 3)
        late.time = 1_600
        #expect(StreamIntegrity(restored).applyTime(of: late, fallback: 0) == 2_100)
        // A state of an older kvod has none: the entry's stamp then.
        let old = try #require(StreamIntegrity.decodeState(Array(#"{"last":"a","chain":"","publishers":{},"complete":false}"#.utf8)))
        #expect(StreamIntegrity(old).applyTime(of: late, fallback: 0) == 1_600)
        #expect(StreamIntegrity.decodeState(Array(#"{"last":"a","chain":"","publishers":{},"complete":false,"time":"x"}"#.utf8)) == nil)
    }

    @Test("a replicator numbers its batches 1, 2, 3… and reuses the number of a batch that was never sent")
    func publisherSequenceHasNoGap() throws {
        let configuration = ClusterConfiguration(servers: ["nats://127.0.0.1:4222"], stream: "s", node: "a")
        let replicator = ClusterReplicator(configuration: configuration, appliedSequence: 0)
        func submitAndTake() throws -> ReplicationEntry {
            replicator.submit(line: Array(#"{"op":"create","object":"o"}"#.utf8), user: nil,
                              writer: .init(connection: ConnectionID(1), requestID: nil, operation: .create, deadline: .max))
            let job = try #require(replicator.takeBatch(deadline: .max))
            return try ReplicationEntry.decode(job.data)
        }
        let first = try submitAndTake()
        replicator.appended(first.batch)
        let second = try submitAndTake()
        _ = replicator.appendFailed(second.batch, attempted: false)
        let third = try submitAndTake()
        expectEqual([first.publisherSequence, second.publisherSequence, third.publisherSequence], [1, 2, 2])
        expectEqual(third.batch, second.batch, "a batch never sent leaves no trace in the stream: its id is free")
        _ = replicator.appendFailed(third.batch, attempted: true)
        let fourth = try submitAndTake()
        expectEqual(fourth.publisherSequence, 3)
        expectEqual(first.publisher, fourth.publisher)
    }
}
