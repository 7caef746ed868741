import Testing
@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer
import KVOJSON

/// The cluster's loop-side pieces without NATS: replication entries round-trip, batches are one at a
/// time and carry what was queued in order, deadlines answer writers (definitively when their write
/// never left), the applied stream sequence is stored with the writes, and the digest follows the state.
@Suite("cluster replicator")
struct ClusterReplicatorTests {
    private let configuration = ClusterConfiguration(servers: ["nats://127.0.0.1:4222"], stream: "s", node: "a")

    private func writer(_ connection: UInt64, deadline: UInt64) -> ClusterReplicator.Writer {
        ClusterReplicator.Writer(connection: ConnectionID(connection), requestID: .int(Int64(connection)), operation: .set,
                                 deadline: deadline)
    }

    @Test("entries round-trip, users included, and refuse what is not an entry")
    func entriesRoundTrip() throws {
        let entry = ReplicationEntry(version: KVOEngine.replicationVersion, node: "a", batch: "a.x.1", operations: [
            .init(line: Array(#"{"op":"set","object":"o","keyPath":"k","value":"line\nbreak"}"#.utf8), user: nil),
            .init(line: Array(#"{"op":"create","object":"p"}"#.utf8), user: "ada"),
        ])
        expectEqual(try ReplicationEntry.decode(entry.encoded()), entry)
        #expect(throws: ReplicationEntryError.self) { try ReplicationEntry.decode(Array("{}".utf8)) }
        #expect(throws: ReplicationEntryError.self) { try ReplicationEntry.decode(Array("nope".utf8)) }
    }

    @Test("one batch in flight; writes queued meanwhile go in the next, in order")
    func batchesOneAtATime() throws {
        let replicator = ClusterReplicator(configuration: configuration, appliedSequence: 7)
        #expect(replicator.takeBatch(deadline: 0) == nil)
        replicator.submit(line: Array("1".utf8), user: nil, writer: writer(1, deadline: 1000))
        replicator.submit(line: Array("2".utf8), user: "u", writer: writer(2, deadline: 1000))
        let first = try #require(replicator.takeBatch(deadline: 99))
        let entry = try ReplicationEntry.decode(first.data)
        expectEqual(entry.operations.map(\.line), [Array("1".utf8), Array("2".utf8)])
        expectEqual(entry.operations.map(\.user), [nil, "u"])
        #expect(entry.batch == first.batch && first.batch.hasPrefix("a."))
        replicator.submit(line: Array("3".utf8), user: nil, writer: writer(3, deadline: 1000))
        #expect(replicator.takeBatch(deadline: 99) == nil, "a second batch while the first is in flight")
        replicator.appended(first.batch)
        let second = try #require(replicator.takeBatch(deadline: 99))
        #expect(second.batch != first.batch)
        let writers = try #require(replicator.writers(ofApplied: first.batch))
        expectEqual(writers.map { $0?.connection.rawValue }, [1, 2])
        #expect(replicator.writers(ofApplied: first.batch) == nil, "answered once")
    }

    @Test("deadlines: a queued write is dropped (definitive), a sent one stays in its batch (not definitive)")
    func deadlines() throws {
        let replicator = ClusterReplicator(configuration: configuration, appliedSequence: 0)
        replicator.submit(line: Array("sent".utf8), user: nil, writer: writer(1, deadline: 100))
        let batch = try #require(replicator.takeBatch(deadline: 0))
        replicator.submit(line: Array("queued".utf8), user: nil, writer: writer(2, deadline: 100))
        replicator.submit(line: Array("later".utf8), user: nil, writer: writer(3, deadline: 500))
        #expect(replicator.expire(now: 99).isEmpty)
        let expired = replicator.expire(now: 100)
        expectEqual(expired.map { $0.writer.connection.rawValue }.sorted(), [1, 2])
        expectEqual(expired.first { $0.writer.connection.rawValue == 1 }?.definitive, false)
        expectEqual(expired.first { $0.writer.connection.rawValue == 2 }?.definitive, true)
        // The sent batch applied later answers nobody; the dropped write is not in the next batch.
        #expect(try #require(replicator.writers(ofApplied: batch.batch)).allSatisfy { $0 == nil })
        replicator.appended(batch.batch)
        let next = try #require(replicator.takeBatch(deadline: 0))
        expectEqual(try ReplicationEntry.decode(next.data).operations.map(\.line), [Array("later".utf8)])
        expectEqual(replicator.appendFailed(next.batch, attempted: false).map(\.definitive), [true])
    }

    @Test("retained writes (an ended session's) outlive every deadline, go back to the queue when never sent, and stall is seen")
    func retainedWrites() throws {
        let replicator = ClusterReplicator(configuration: configuration, appliedSequence: 0)
        func retained(_ object: String? = nil) -> ClusterReplicator.Writer {
            ClusterReplicator.Writer(connection: ConnectionID(0), requestID: object.map { .string($0) }, operation: .set,
                                     deadline: .max, retained: true)
        }
        replicator.submit(line: Array("client".utf8), user: nil, writer: writer(1, deadline: 100))
        let first = try #require(replicator.takeBatch(deadline: 7, now: 1_000))
        #expect(first.deadline == 7, "a batch of client writes only keeps its deadline")
        #expect(!replicator.appendsStalled(now: 1_999))
        #expect(replicator.appendsStalled(now: 2_000), "in flight for a second")
        // Appends stall: an action and an ephemeral deletion queue behind the batch, with a client write between.
        replicator.submit(line: Array("action".utf8), user: "u", writer: retained())
        replicator.submit(line: Array("late client".utf8), user: nil, writer: writer(2, deadline: 200))
        replicator.submit(line: Array("delete".utf8), user: "$kvod", writer: retained("cursor"))
        let expired = replicator.expire(now: 60_000)
        #expect(expired.map { $0.writer.connection.rawValue }.sorted() == [1, 2], "only the client writes: \(expired)")
        #expect(replicator.retainedWriteCount == 2)
        replicator.appended(first.batch)
        #expect(!replicator.appendsStalled(now: 60_000))
        let second = try #require(replicator.takeBatch(deadline: 7, now: 60_000))
        #expect(second.deadline == .max, "a batch with a retained write is sent whenever the bridge gets to it")
        #expect(try ReplicationEntry.decode(second.data).operations.map(\.line) == [Array("action".utf8), Array("delete".utf8)])
        // Never sent after all (the bridge stopped first): the retained writes go back to the queue, in order.
        #expect(replicator.appendFailed(second.batch, attempted: false).isEmpty, "nobody to answer")
        replicator.submit(line: Array("next".utf8), user: nil, writer: writer(3, deadline: 90_000))
        let third = try #require(replicator.takeBatch(deadline: 7, now: 60_001))
        let lines = try ReplicationEntry.decode(third.data).operations.map { String(decoding: $0.line, as: UTF8.self) }
        #expect(lines == ["action", "delete", "next"])
        let writers = try #require(replicator.writers(ofApplied: third.batch))
        #expect(writers.map { $0?.requestID } == [nil, "cursor", 3])
        #expect(replicator.retainedWriteCount == 0)
    }

    @Test("pipelined writes expire in the order they were submitted: sent batches oldest first, then the queue")
    func expiryKeepsSubmissionOrder() throws {
        let replicator = ClusterReplicator(configuration: configuration, appliedSequence: 0)
        // Batches 1...11 sent and appended, not yet applied (ids ending .9, .10, .11: not in string order).
        var order: [UInt64] = []
        for index in 1...11 {
            replicator.submit(line: Array("w\(index)".utf8), user: nil, writer: writer(UInt64(index), deadline: 100))
            let batch = try #require(replicator.takeBatch(deadline: 0))
            replicator.appended(batch.batch)
            order.append(UInt64(index))
        }
        replicator.submit(line: Array("q".utf8), user: nil, writer: writer(12, deadline: 100))
        order.append(12)
        let expired = replicator.expire(now: 100)
        expectEqual(expired.map(\.writer.connection.rawValue), order)
        expectEqual(expired.map(\.definitive), Array(repeating: false, count: 11) + [true])
    }

    @Test("a batch carries at most maximumBatchBytes of lines (at least one); the rest go next, in order")
    func batchesAreBounded() throws {
        let replicator = ClusterReplicator(configuration: configuration, appliedSequence: 0)
        let line = [UInt8](repeating: 0x61, count: 1000)
        let total = ClusterReplicator.maximumBatchBytes / 1000 * 2 + 5
        for index in 0..<total {
            replicator.submit(line: line + Array("\(index)".utf8), user: nil, writer: writer(UInt64(index), deadline: 100))
        }
        var sizes: [Int] = []
        var written: [UInt64] = []
        while let job = replicator.takeBatch(deadline: 0) {
            let entry = try ReplicationEntry.decode(job.data)
            #expect(entry.operations.reduce(0) { $0 + $1.line.count } <= ClusterReplicator.maximumBatchBytes)
            #expect(job.data.count < 1 << 20)
            sizes.append(entry.operations.count)
            replicator.appended(job.batch)
            written += try #require(replicator.writers(ofApplied: job.batch)).compactMap { $0?.connection.rawValue }
        }
        expectEqual(sizes.count, 3, "\(sizes)")
        expectEqual(written, (0..<UInt64(total)).map { $0 })
        // A line over the bound still goes, alone.
        replicator.submit(line: [UInt8](repeating: 0x62, count: ClusterReplicator.maximumBatchBytes + 1), user: nil,
                          writer: writer(1, deadline: 100))
        replicator.submit(line: Array("small".utf8), user: nil, writer: writer(2, deadline: 100))
        let big = try #require(replicator.takeBatch(deadline: 0))
        expectEqual(try ReplicationEntry.decode(big.data).operations.count, 1)
    }

    @Test("the applied stream sequence is stored with the writes and read back")
    func streamSequencePersists() throws {
        let directory = TemporaryDirectory()
        do {
            let store = try SQLiteStore(directory: directory.path, sync: .normal, historyLimit: 100, historyByteLimit: 1 << 20)
            expectEqual(try store.readStreamSequence(), 0)
            var batch = CommitBatch(revision: 0, entries: [], objects: [:])
            batch.streamSequence = 42
            try store.commit(batch)
            store.close()
        }
        let reopened = try SQLiteStore(directory: directory.path, sync: .normal, historyLimit: 100, historyByteLimit: 1 << 20)
        defer { reopened.close() }
        expectEqual(try reopened.readStreamSequence(), 42)
    }

    @Test("the digest changes with the state and not with the order writes built it in")
    func digestFollowsState() throws {
        let one = KVOEngine()
        let two = KVOEngine()
        var notifications: [ChangeNotification] = []
        let access = ConnectionAccess.open()
        _ = try one.create("a", values: ["x": 1, "y": 2], access: access, notifications: &notifications)
        _ = try one.create("b", values: [:], access: access, notifications: &notifications)
        _ = try two.create("a", values: ["y": 2, "x": 1], access: access, notifications: &notifications)
        #expect(StateDigest.of(one) != StateDigest.of(two), "the revision differs")
        _ = try two.create("b", values: [:], access: access, notifications: &notifications)
        expectEqual(StateDigest.of(one), StateDigest.of(two))
        expectEqual(StateDigest.of(one).count, 64)
        _ = try two.set("b", keyPath: KeyPath("k"), value: .bool(true), access: access, notifications: &notifications)
        #expect(StateDigest.of(one) != StateDigest.of(two))
    }
}
