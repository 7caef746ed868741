import KVOEngine
import KVOModel

/// What the NATS bridge's threads hand to the loop thread (through `BridgeInbox`).
enum BridgeMessage: Sendable {
    /// A stream message, with its stream sequence (1, 2, …), in stream order, delivered by subscription
    /// `generation` (the loop ignores those of a subscription it replaced).
    case entry(sequence: UInt64, data: [UInt8], generation: UInt64)
    /// Subscription `generation`'s consumer was re-created by libnats (a new consumer name in the delivery
    /// metadata: a reconnect or a leader change), from the sequence after the last it delivered: the loop
    /// subscribes again from one entry early, to check that the copy now serving it continues what it applied.
    case consumerChanged(generation: UInt64, sequence: UInt64)
    /// A batch was appended (acknowledged by a quorum of the stream's replicas) at stream sequence
    /// `sequence` (0: a duplicate of a copy still being replicated), after `attempts` publishes.
    case published(batch: String, sequence: UInt64, attempts: Int)
    /// The newest whole snapshot, read for a node that re-bootstraps in place (nil: none could be read; why in `problem`).
    case snapshotFetched(ClusterSnapshot?, problem: String?)
    /// A batch could not be appended before its deadline and was never sent (`attempted` is false then:
    /// a batch once sent is sent again until it is acknowledged, so that a publisher's batches have no gap).
    case publishFailed(batch: String, reason: String, attempted: Bool)
    /// Another node's signal, as its `SignalRelay` published it (`{"node":N,"object":O,"value":V}`).
    case signal([UInt8])
    /// Something to log (connections lost and regained, the stream created).
    case log(String, isError: Bool)
}

/// One batch for the bridge to append: its message id, its bytes and the `uv_hrtime` (nanoseconds) by
/// which it must be appended or given up.
struct PublishJob: Sendable {
    var batch: String
    var data: [UInt8]
    var deadline: UInt64
}
