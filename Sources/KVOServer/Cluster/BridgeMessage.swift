import KVOEngine
import KVOModel

/// What the NATS bridge's threads hand to the loop thread (through `BridgeInbox`).
enum BridgeMessage: Sendable {
    /// A stream message, with its stream sequence (1, 2, …), in stream order.
    case entry(sequence: UInt64, data: [UInt8])
    /// A batch was appended (acknowledged by a quorum of the stream's replicas).
    case published(batch: String, sequence: UInt64)
    /// A batch could not be appended before its deadline. `attempted`: a publish was sent, so the
    /// batch may still be in the stream (it will then be applied everywhere); false: it never left.
    case publishFailed(batch: String, reason: String, attempted: Bool)
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
