/// How a node joins a cluster (`--cluster`, `--cluster-stream`, `--node`, `--cluster-write-timeout`):
/// the NATS servers, the JetStream stream every node applies, and this node's name. A value; any thread.
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

    public init(servers: [String], stream: String = "kvod", node: String, writeTimeout: Double = 5) {
        self.servers = servers
        self.stream = stream
        self.node = node
        self.writeTimeout = writeTimeout
    }

    /// The subject the stream captures and the nodes publish on.
    public var subject: String { "kvod.\(stream).log" }

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
        if !(writeTimeout > 0 && writeTimeout <= 3600) { return "--cluster-write-timeout must be more than 0 and at most 3600 seconds" }
        return nil
    }

    private static func isNameByte(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || byte == 0x2D || byte == 0x5F
    }
}
