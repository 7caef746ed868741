import KVOEngine
import KVOModel

/// How a node joins a cluster (`--cluster`, `--cluster-stream`, `--node`, `--cluster-write-timeout`,
/// `--cluster-snapshot-every`): the NATS servers, the JetStream stream every node applies, this node's
/// name and how often it snapshots. A value; any thread.
///
/// docs/design.md, "Cluster".
public struct ClusterConfiguration: Sendable {
    /// Every NATS server's URL (`nats://127.0.0.1:4222`); the client fails over between them.
    public var servers: [String]
    /// The JetStream stream holding the replicated writes (created, replicated on up to 3 servers, if missing).
    public var stream: String
    /// This node's name: unique in the cluster, part of each batch's message id.
    public var node: String
    /// Seconds a write may wait for its batch to be appended to the stream and applied here before it is
    /// answered `unavailable`.
    public var writeTimeout: Double
    /// Every node snapshots its state after applying each stream sequence that is a multiple of this
    /// (0: never) and publishes it to `snapshotStream`; the stream is trimmed behind the snapshots
    /// (docs/design.md, "Snapshots and trimming").
    public var snapshotEvery: UInt64
    /// Every node publishes its running hash (`StreamIntegrity`) as a checkpoint after each stream sequence
    /// that is a multiple of this, and compares the other nodes' with its own (docs/design.md, "Integrity
    /// of the stream").
    public var checkpointEvery: UInt64

    public init(servers: [String], stream: String = "kvod", node: String, writeTimeout: Double = 5,
                snapshotEvery: UInt64 = ClusterConfiguration.defaultSnapshotEvery,
                checkpointEvery: UInt64 = ClusterConfiguration.defaultCheckpointEvery) {
        self.servers = servers
        self.stream = stream
        self.node = node
        self.writeTimeout = writeTimeout
        self.snapshotEvery = snapshotEvery
        self.checkpointEvery = checkpointEvery
    }

    /// Stream entries between checkpoints, by default: one checkpoint message per node every 1,000 entries.
    public static let defaultCheckpointEvery: UInt64 = 1000

    /// Whether this node checkpoints after applying `sequence` (every `checkpointEvery`, and at every
    /// snapshot, so that a snapshot's running hash can be checked against the nodes' claims).
    func isCheckpoint(_ sequence: UInt64) -> Bool {
        sequence % checkpointEvery == 0 || (snapshotEvery > 0 && sequence % snapshotEvery == 0)
    }

    /// Stream entries between snapshots, by default.
    public static let defaultSnapshotEvery: UInt64 = 10_000

    /// The subject the stream captures and the nodes publish on.
    public var subject: String { "kvod.\(stream).log" }

    /// The NATS core subject of signals between the nodes (`SignalRelay`): not captured by any stream.
    public var signalSubject: String { "kvod.\(stream).signal" }

    /// The stream holding the snapshots' chunks (`<stream>_SNAP`), and its one subject.
    public var snapshotStream: String { "\(stream)_SNAP" }
    public var snapshotSubject: String { "kvod.\(stream).snap" }

    /// Replicas of the stream: 3 (JetStream's R3) when there are at least 3 servers, else one per server.
    public var replicas: Int { min(3, max(1, servers.count)) }

    /// Why the settings cannot work (a message for the command line), or nil.
    public var problem: String? {
        if servers.isEmpty { return "--cluster needs at least one NATS URL (nats://HOST:PORT, comma-separated)" }
        if let bad = servers.first(where: { !$0.hasPrefix("nats://") && !$0.hasPrefix("tls://") }) {
            return "--cluster: '\(bad)' is not a nats:// URL"
        }
        if node.isEmpty || !node.utf8.allSatisfy(ClusterConfiguration.isNameByte) {
            return "--node must be a non-empty name of letters, digits, '-' and '_'"
        }
        if stream.isEmpty || !stream.utf8.allSatisfy(ClusterConfiguration.isNameByte) {
            return "--cluster-stream must be a non-empty name of letters, digits, '-' and '_'"
        }
        if checkpointEvery < 16 { return "--cluster-checkpoint-every must be at least 16" }
        if !(writeTimeout > 0 && writeTimeout <= 3600) { return "--cluster-write-timeout must be more than 0 and at most 3600 seconds" }
        return nil
    }

    private static func isNameByte(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || byte == 0x2D || byte == 0x5F
    }
}
