import CLibUV
import Logging

/// What only a cluster node has (`--cluster`; docs/design.md, "Cluster"), made together and held by `Server` as one
/// optional, so that a single node holds nil and runs no cluster code on any request path: the replicator (the
/// stream's bookkeeping), the NATS bridge and the snapshot publisher (their own threads), the inbox they post to
/// and the async handle that wakes the loop to drain it, and the requests waiting on the stream (writes in flight
/// per connection, reads waiting for a revision).
///
/// Owned by `Server`, which closes it (`close(logger:)`); loop thread only, but for the bridge's and the
/// publisher's threads, which reach the loop through `inbox` alone.
final class ClusterNode {
    /// How long a stopping server waits for the cluster's threads (the NATS bridge, the snapshot publisher), in
    /// nanoseconds: half a second.
    static let stopWait: UInt64 = 500_000_000

    /// The writes waiting for the stream, the sequence applied, the stream's integrity and the node's health.
    let replicator: ClusterReplicator
    /// Appends batches to the stream and delivers its entries (its own threads).
    let bridge: NATSBridge
    /// What the bridge and the publisher hand back to the loop, drained when `asyncHandle` fires
    /// (`Server.drainClusterInbox`).
    let inbox: BridgeInbox
    let asyncHandle: UnsafeMutablePointer<uv_async_t>
    /// Signals to and from the other nodes over NATS core (its own thread; the bridge's connection).
    let signals: SignalRelay
    /// With `--cluster-snapshot-every` above 0: publishes this node's snapshots (its own thread).
    let snapshotPublisher: SnapshotPublisher?
    /// Reads and observes waiting for their `atLeastRev`.
    var revisionWaits = RevisionWaits()
    /// Each connection's writes in flight and the request held behind them.
    var pipelinedWrites = PipelinedWrites()
    /// `uv_now` ms of the last look at the replicated sessions (`Server.replicatedPresenceTick`).
    var presenceTickAt: UInt64 = 0
    /// The server's own presence operations submitted and not yet given up on (`d.<id>.<epoch>` for a detach,
    /// `e.<id>.<epoch>` for an end), with when (`uv_now` ms): not submitted again meanwhile.
    var presencePending: [String: UInt64] = [:]

    init(_ configuration: ClusterConfiguration, appliedSequence: UInt64, integrity: StreamIntegrity.State) {
        replicator = ClusterReplicator(configuration: configuration, appliedSequence: appliedSequence, integrity: integrity)
        asyncHandle = allocateHandle(uv_async_t.self, kind: UV_ASYNC)
        inbox = BridgeInbox(asyncHandle)
        // One entry early: the loop checks that the stream still holds, at the applied sequence, the batch it applied there.
        signals = SignalRelay(configuration: configuration, inbox: inbox)
        bridge = NATSBridge(configuration: configuration, inbox: inbox, startSequence: appliedSequence, signals: signals)
        snapshotPublisher = configuration.snapshotEvery > 0 ? SnapshotPublisher(configuration: configuration, inbox: inbox) : nil
    }

    /// Starts the bridge's and the publisher's threads (`Server.run`).
    func start() {
        bridge.start()
        signals.start()
        snapshotPublisher?.start()
    }

    /// Stops the threads and closes the async handle. The NATS threads get one deadline together: a thread still
    /// in a NATS call then (NATS cut off by a partition) is left to end on its own, so that SIGTERM stops a node
    /// within a second (docs/design.md, "Cluster", Threads).
    func close(logger: Logger) {
        inbox.invalidate()
        let deadline = WorkerThread.now() &+ ClusterNode.stopWait
        let bridgeStopped = bridge.stop(until: deadline)
        _ = signals.stop(until: deadline)
        let publisherStopped = snapshotPublisher?.stop(until: deadline) ?? true
        if !bridgeStopped || !publisherStopped {
            let which = [bridgeStopped ? nil : "bridge", publisherStopped ? nil : "snapshot publisher"].compactMap { $0 }
            logger.warning("cluster: the NATS \(which.joined(separator: " and ")) had not stopped within \(Double(ClusterNode.stopWait) / 1e9) s (a NATS server not answering); not waited for")
        }
        closeHandle(asyncHandle)
    }
}
