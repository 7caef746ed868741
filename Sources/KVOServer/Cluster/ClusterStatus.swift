/// What `digest` says of this node's place in the cluster (docs/protocol.md, `digest`): taken from the
/// `ClusterReplicator` when a `digest` is answered. A value; loop thread.
struct ClusterStatus {
    /// This node's name (`--node`).
    let node: String
    /// The last stream sequence this node applied.
    let applied: UInt64
    /// The stream sequence of the snapshot installed at start-up, if one was.
    let snapshot: UInt64?
    /// The running hash over what it applied (64 hex digits; empty when unknown).
    let chain: String
    /// Why the node does not apply the stream (halted, diverged, behind); nil while it applies it.
    let health: String?
    /// The other nodes, as their latest checkpoint claims describe them.
    let peers: [StreamIntegrity.Peer]
}
