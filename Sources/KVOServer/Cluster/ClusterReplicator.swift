import KVOEngine
import KVOJSON
import KVOModel

/// The loop thread's side of the cluster: the writes this node accepted and has not yet applied, the
/// batch being appended, the last stream sequence applied (and committed), what the node knows of the
/// stream (`integrity`) and whether it applies it (`health`).
///
/// A write is not applied when it arrives: `submit` queues it, the check phase hands the queued writes
/// to the bridge as one batch (`takeBatch`, at most one batch in flight, so writes arriving meanwhile
/// make the next batch larger; at most `maximumBatchBytes` of request lines, the rest waiting for the
/// next), and the writer is answered when the stream delivers that batch back
/// and the server has applied it (`writers(ofApplied:)`), or `unavailable` at its deadline (`expire`).
/// A retained write (`Writer.retained`: an ended session's, which nobody would retry) has no deadline: it
/// stays queued however long appends stall, its batch is sent whenever the bridge gets to it, and a batch of
/// it that was never sent gives its retained writes back to the queue (`appendFailed`).
/// Bookkeeping only: the server applies, replies and resumes connections. Loop thread only.
final class ClusterReplicator {
    /// A client waiting for its write: where the reply goes.
    struct Writer {
        var connection: ConnectionID
        var requestID: JSONValue?
        var operation: MetricsOperation
        /// `uv_now` milliseconds after which it is answered `unavailable`.
        var deadline: UInt64
        /// A `tokenCreate`'s new token text, for its reply only: the stream carries the token's hash.
        var tokenText: String? = nil
        /// `uv_hrtime()` when the loop began handling the request (`kvod_request_duration_seconds`); 0: unknown.
        var started: UInt64 = 0
        /// A write that must reach the stream (an ended session's action or ephemeral deletion): never
        /// dropped at its deadline, and given back to the queue when its batch could not be sent.
        var retained = false
    }

    /// A writer answered `unavailable` by `expire` or a failed append.
    struct Expired {
        var writer: Writer
        /// True when the write never left this node (it will not be applied); false when its batch was
        /// sent and may still be in the stream (then it is applied everywhere, unanswered).
        var definitive: Bool
    }

    let configuration: ClusterConfiguration
    /// The last stream sequence applied to the engine.
    var appliedSequence: UInt64
    /// The last stream sequence committed to the store with the writes it carried (equal to
    /// `appliedSequence` in memory).
    var committedSequence: UInt64
    /// What this node knows of the stream it applied: identities, position, running hash.
    let integrity: StreamIntegrity
    /// Whether this node applies the stream; anything else refuses writes (`refusal`).
    var health: ClusterHealth = .applying
    /// The bridge subscription whose deliveries are applied (older ones' are ignored): 1 for the first, one
    /// more for each `NATSBridge.resubscribe`.
    var subscriptionGeneration: UInt64 = 1
    /// True until the first delivery of the current subscription: it must be the entry at the applied
    /// sequence (one entry early), and be the batch applied there.
    var awaitingContinuity = true
    /// `uv_now` of the last repair step (a new subscription, a snapshot asked for).
    var lastRepairAttempt: UInt64 = 0
    /// A snapshot was asked of the bridge and has not come back yet.
    var snapshotRequested = false
    /// The stream sequence where batches of a publisher were found missing, and how many subscriptions
    /// in a row delivered that gap there (`Server.applyClusterEntry`: after `gapRefetches` it is taken as
    /// the stream's own).
    var gap: (sequence: UInt64, times: Int)?
    static let gapRefetches = 3
    /// Halts in a row at one applied sequence (reset when an entry is applied): past
    /// `haltsBeforeSnapshot`, no copy of the stream continues what this node applied (its own numbering
    /// went wrong), and it installs a snapshot instead.
    var halts: (sequence: UInt64, times: Int)?
    static let haltsBeforeSnapshot = 5
    /// The sequence of the snapshot this node last installed in place (a second one at the same place would
    /// not help: `Server.diverge`).
    var installedSnapshot: UInt64?
    /// The node's store could not take writes (`StorageHealth`): deliveries are ignored, nothing past the
    /// committed sequence is applied, and the node subscribes again once the store writes
    /// (`Server.checkStorage`).
    var awaitingStorage = false
    /// Writes not yet handed to the bridge, with their writers (same indexes).
    private var queued: [ReplicationEntry.Operation] = []
    private var queuedWriters: [Writer] = []
    /// Batches handed to the bridge and not yet applied here, oldest first (so `expire` answers one
    /// connection's pipelined writes in request order): their writers by operation index (nil once
    /// answered `unavailable`). Seldom more than two or three.
    private var awaiting: [(batch: String, writers: [Writer?], retained: [(ReplicationEntry.Operation, Writer)])] = []
    /// The batch the bridge is appending, if any, and when (`uv_now` ms) it was handed to the bridge.
    private(set) var batchInFlight: String?
    private var batchTakenAt: UInt64 = 0
    /// How long (ms) a batch may be in flight before the node takes appends as stalled (`appendsStalled`):
    /// an append takes milliseconds; a second is a cut from NATS, an election or a stream without quorum.
    static let stallMilliseconds: UInt64 = 1_000
    private var batchCounter: UInt64 = 0
    /// Makes batch ids unique across restarts of this node (JetStream de-duplicates by id).
    private let incarnation: String

    init(configuration: ClusterConfiguration, appliedSequence: UInt64, integrity: StreamIntegrity.State = StreamIntegrity.State()) {
        self.configuration = configuration
        self.appliedSequence = appliedSequence
        self.committedSequence = appliedSequence
        self.integrity = StreamIntegrity(integrity)
        var generator = SystemRandomNumberGenerator()
        incarnation = String(generator.next() as UInt64, radix: 36)
    }

    /// Writes waiting for their batch to be appended or applied.
    var pendingWriteCount: Int { queuedWriters.count + awaiting.reduce(0) { $0 + $1.writers.count { $0 != nil } } }

    /// Most bytes of request lines in one batch (at least one operation goes, whatever its size): the
    /// entry, with its lines escaped as JSON strings, stays under NATS's default 1 MiB `max_payload`
    /// however many writes connections pipeline.
    static let maximumBatchBytes = 128 << 10

    /// Queues a write accepted from a client (its line as received), or a presence operation with its
    /// `presence` context (`Server+ReplicatedPresence`).
    func submit(line: [UInt8], user: String?, presence: JSONValue? = nil, writer: Writer) {
        var operation = ReplicationEntry.Operation(line: line, user: user)
        operation.presence = presence
        queued.append(operation)
        queuedWriters.append(writer)
    }

    /// This node incarnation's name in the stream (`ReplicationEntry.publisher` of its batches): what holds
    /// its clients' presence sessions.
    var publisher: String { "\(configuration.node).\(incarnation)" }

    /// `uv_now` ms when this node last handed a batch to the bridge (0: never).
    var lastBatchTakenAt: UInt64 { batchTakenAt }

    /// Queues a change to the users accepted from an admin (`user`).
    func submit(userChange: UserChange, user: String?, writer: Writer) {
        queued.append(ReplicationEntry.Operation(line: [], user: user, userChange: userChange))
        queuedWriters.append(writer)
    }

    /// The next batch to append, unless one is in flight or nothing is queued. `deadline` in `uv_hrtime`
    /// nanoseconds (none for a batch with a retained write). `now`: `uv_now` ms, for `appendsStalled`.
    /// `time`: the wall-clock time (ms) every node applies the batch's writes at (`ReplicationEntry.time`).
    func takeBatch(deadline: UInt64, time: Int64? = nil, now: UInt64 = 0) -> PublishJob? {
        guard batchInFlight == nil, !queued.isEmpty else { return nil }
        batchCounter += 1
        let batch = "\(configuration.node).\(incarnation).\(batchCounter)"
        var count = 0
        var bytes = 0
        while count < queued.count, count == 0 || bytes + queued[count].line.count <= ClusterReplicator.maximumBatchBytes {
            bytes += queued[count].line.count
            count += 1
        }
        var entry = ReplicationEntry(version: KVOEngine.replicationVersion, node: configuration.node, batch: batch,
                                     operations: Array(queued[..<count]), publisherSequence: batchCounter)
        entry.time = time
        var retained: [(ReplicationEntry.Operation, Writer)] = []
        for index in 0..<count where queuedWriters[index].retained { retained.append((queued[index], queuedWriters[index])) }
        awaiting.append((batch, queuedWriters[..<count].map { $0 }, retained))
        if count == queued.count {
            queued.removeAll(keepingCapacity: true)
            queuedWriters.removeAll(keepingCapacity: true)
        } else {
            queued.removeFirst(count)
            queuedWriters.removeFirst(count)
        }
        batchInFlight = batch
        batchTakenAt = now
        return PublishJob(batch: batch, data: entry.encoded(), deadline: retained.isEmpty ? deadline : .max)
    }

    /// Whether the bridge has been appending the same batch for `stallMilliseconds` or more at `now`: the
    /// stream is not taking this node's appends (sessions do not end meanwhile: `Server.endDueSessions`).
    func appendsStalled(now: UInt64) -> Bool {
        batchInFlight != nil && now &- batchTakenAt >= ClusterReplicator.stallMilliseconds
    }

    /// Retained writes queued or in batches not yet applied here.
    var retainedWriteCount: Int {
        queuedWriters.count { $0.retained } + awaiting.reduce(0) { $0 + $1.retained.count }
    }

    /// The bridge appended `batch`: the next one may go.
    func appended(_ batch: String) {
        if batchInFlight == batch { batchInFlight = nil }
    }

    /// The bridge gave up on `batch`: its writers still waiting, to be answered `unavailable`. A batch
    /// never sent (`attempted` false: the bridge sends a batch once sent until it is acknowledged) gives its
    /// publisher sequence to the next one, so the publisher's batches in the stream have no gap, and its
    /// retained writes back to the front of the queue, in their order.
    func appendFailed(_ batch: String, attempted: Bool) -> [Expired] {
        if batchInFlight == batch {
            batchInFlight = nil
            if !attempted { batchCounter -= 1 }
        }
        guard let index = awaiting.firstIndex(where: { $0.batch == batch }) else { return [] }
        let (_, writers, retained) = awaiting.remove(at: index)
        if !attempted, !retained.isEmpty {
            queued.insert(contentsOf: retained.map(\.0), at: 0)
            queuedWriters.insert(contentsOf: retained.map(\.1), at: 0)
        }
        return writers.compactMap { writer in
            guard let writer, !writer.retained else { return nil }
            return Expired(writer: writer, definitive: !attempted)
        }
    }

    /// A checkpoint of this node's running hash after `sequence`, to append (message id `check.<node>.<sequence>`).
    /// `revision`: this node's revision then, which operators see in the other nodes' `digest`.
    func checkpointJob(after sequence: UInt64, revision: UInt64, deadline: UInt64) -> PublishJob {
        let batch = "check.\(configuration.node).\(sequence)"
        let entry = ReplicationEntry(version: KVOEngine.replicationVersion, node: configuration.node, batch: batch,
                                     operations: [], checkpoint: .init(sequence: sequence, hash: integrity.chainHex,
                                                                        revision: revision))
        return PublishJob(batch: batch, data: entry.encoded(), deadline: deadline)
    }

    /// Every writer waiting for a batch, to be answered `unavailable` (the node re-bootstraps: its batches
    /// may still be applied, by the other nodes and by this one after it installed a snapshot).
    func abandonAwaiting() -> [Expired] {
        var expired: [Expired] = []
        for (_, writers, _) in awaiting {
            for case let writer? in writers where !writer.retained { expired.append(Expired(writer: writer, definitive: false)) }
        }
        awaiting.removeAll()
        return expired
    }

    /// Why a write or an `atLeastRev` read is refused now (nil: the node applies the stream).
    var refusal: String? {
        health.reason.map { "this node is not applying the cluster's stream (\($0)); use another node" }
    }

    /// `batch` was applied here: the writers of its operations, by index (nil: nobody waits, because the
    /// batch is another node's, or the writer was answered already).
    func writers(ofApplied batch: String) -> [Writer?]? {
        removeAwaiting(batch)
    }

    private func removeAwaiting(_ batch: String) -> [Writer?]? {
        guard let index = awaiting.firstIndex(where: { $0.batch == batch }) else { return nil }
        return awaiting.remove(at: index).writers
    }

    /// Writers past their deadline at `now` (`uv_now` ms), no longer waited for, in the order they were
    /// submitted (the batches sent, oldest first, then the queue). Queued writes among them are dropped
    /// (never sent: definitive); those of a batch already sent stay in the batch. Retained writes are neither
    /// dropped nor answered: they wait for the stream however long it takes.
    func expire(now: UInt64) -> [Expired] {
        var expired: [Expired] = []
        for position in awaiting.indices {
            for index in awaiting[position].writers.indices {
                if let writer = awaiting[position].writers[index], !writer.retained, writer.deadline <= now {
                    expired.append(Expired(writer: writer, definitive: false))
                    awaiting[position].writers[index] = nil
                }
            }
        }
        // Client writes' deadlines grow in queue order: the first one not retained is the oldest.
        if let first = queuedWriters.first(where: { !$0.retained }), first.deadline <= now {
            var keptOperations: [ReplicationEntry.Operation] = []
            var keptWriters: [Writer] = []
            for (operation, writer) in zip(queued, queuedWriters) {
                if writer.deadline <= now, !writer.retained {
                    expired.append(Expired(writer: writer, definitive: true))
                } else {
                    keptOperations.append(operation)
                    keptWriters.append(writer)
                }
            }
            queued = keptOperations
            queuedWriters = keptWriters
        }
        return expired
    }
}
