import CLibUV
import KVOJSON
import KVOModel
import KVOVersion
#if canImport(Glibc)
import Glibc
import KVOEngine
#endif

/// What `GET /metrics` reports about one server: counters the server bumps as it works, histograms of
/// request (`RequestDurations`), group-commit and loop-iteration times, gauges read from the engine, the loop
/// and the store's files (`storageUsage`) when scraped, the build's version and commit, and the process's
/// figures (`ProcessStatistics`).
///
/// Owned by `Server`; loop thread only. Every update and every rendering run on the loop thread (the
/// HTTP connection asking for `/metrics` is served by the same loop), so the counters are plain
/// integers: no atomics, no locks, one addition per update on the request and event paths, and per
/// request one histogram observation (docs/design.md, "Metrics").
final class ServerMetrics {
    /// Which output limit closed a slow consumer (the `limit` label).
    enum SlowConsumerLimit: Int, CaseIterable {
        /// Its own queued output passed `--max-output-buffer`.
        case connection
        /// All connections' queued output passed `--max-total-output` and it had the most queued.
        case total

        var label: String {
            switch self {
            case .connection: "connection"
            case .total: "total"
            }
        }
    }

    /// Why a connection was refused at accept time (the `reason` label of `kvod_connections_refused_total`).
    enum RefusalReason: Int, CaseIterable {
        /// Over `--max-connections`.
        case maxConnections
        /// Out of file descriptors: past what the open-file limit leaves room for, or `accept` itself
        /// failing with EMFILE or ENFILE.
        case fileDescriptors

        var label: String {
            switch self {
            case .maxConnections: "max_connections"
            case .fileDescriptors: "file_descriptors"
            }
        }
    }

    /// How a TLS handshake failed (the `reason` label of `kvod_tls_handshake_failures_total`).
    enum HandshakeFailure: Int, CaseIterable {
        /// OpenSSL refused it: garbage or plaintext instead of a ClientHello, no shared version, a client
        /// certificate that did not verify, ...
        case error
        /// Not finished within `--tls-handshake-timeout`.
        case timeout

        var label: String {
            switch self {
            case .error: "error"
            case .timeout: "timeout"
            }
        }
    }

    /// When the server was made (start-up), in seconds since the Unix epoch.
    let startTime = ProcessStatistics.now()
    private(set) var connectionsAccepted = [UInt64](repeating: 0, count: ConnectionKind.allCases.count)
    private(set) var connectionsRefused = [UInt64](repeating: 0, count: RefusalReason.allCases.count)
    private(set) var tlsHandshakeFailures = [UInt64](repeating: 0, count: HandshakeFailure.allCases.count)
    private(set) var connectionsOpen = [Int](repeating: 0, count: ConnectionKind.allCases.count)
    private(set) var slowConsumerDisconnects = [UInt64](repeating: 0, count: SlowConsumerLimit.allCases.count)
    /// Heartbeats sent to quiet connections, and connections closed for sending nothing within `--idle-timeout`.
    var heartbeatsSent: UInt64 = 0
    private(set) var idleClosed: UInt64 = 0
    /// Requests answered, by operation and outcome: index `operation * outcomeCount + outcome`, where
    /// outcome 0 is success and `1 + i` is `KVOError.Code.allCases[i]`.
    private var requestCounts = [UInt64](repeating: 0, count: MetricsOperation.allCases.count * ServerMetrics.outcomeCount)
    /// Events queued for subscribers (one per recipient) and their bytes.
    var eventsSent: UInt64 = 0
    var eventBytesSent: UInt64 = 0
    /// Group commits (one transaction per loop iteration with writes), durable mode only.
    private(set) var groupCommits = MetricsHistogram(boundsNanoseconds: MetricsHistogram.latencyBoundsNanoseconds)
    /// Time the loop spent working (not waiting in poll) per iteration.
    private(set) var loopIterations = MetricsHistogram(boundsNanoseconds: MetricsHistogram.latencyBoundsNanoseconds)
    private var lastIterationEnd: UInt64 = 0
    private var lastIdleTime: UInt64 = 0
    /// How long requests took to answer, by operation (`RequestDurations`).
    private(set) var requestDurations = RequestDurations()
    /// Requests that took the loop at least `--slow-request`, by operation, and loop iterations that worked that
    /// long (`SlowLog`, which keeps the last of each).
    private(set) var slowRequests = [UInt64](repeating: 0, count: MetricsOperation.allCases.count)
    private(set) var loopStalls: UInt64 = 0
    /// The git commit of this build (`kvod_build_info{commit}`): `ServerConfiguration.buildCommit`.
    var buildCommit = "unknown"
    /// Reads the store's usage when scraped (set by the server, which sees the store; nil: no store files).
    var storageUsage: () -> StorageUsageGauges? = { nil }

    private static let outcomeCount = 1 + KVOError.Code.allCases.count

    /// A connection was accepted on `transport`.
    func connectionOpened(_ transport: ConnectionKind) {
        connectionsAccepted[transport.rawValue] &+= 1
        connectionsOpen[transport.rawValue] += 1
    }

    /// An open connection switched transports (an HTTP connection upgraded to WebSocket): counted as
    /// accepted on the new one too.
    func connectionUpgraded(from old: ConnectionKind, to new: ConnectionKind) {
        connectionsOpen[old.rawValue] -= 1
        connectionsOpen[new.rawValue] += 1
        connectionsAccepted[new.rawValue] &+= 1
    }

    /// A connection accepted on `transport` closed for `reason`. Refusals at accept time and failed TLS
    /// handshakes are counted here, by their close reason.
    func connectionClosed(_ transport: ConnectionKind, reason: CloseReason) {
        connectionsOpen[transport.rawValue] -= 1
        switch reason {
        case .outputLimitExceeded: slowConsumerDisconnects[SlowConsumerLimit.connection.rawValue] &+= 1
        case .totalOutputLimitExceeded: slowConsumerDisconnects[SlowConsumerLimit.total.rawValue] &+= 1
        case .rejected: connectionRefused(.maxConnections)
        case .outOfDescriptors: connectionRefused(.fileDescriptors)
        case .tlsHandshakeFailed: tlsHandshakeFailures[HandshakeFailure.error.rawValue] &+= 1
        case .tlsHandshakeTimeout: tlsHandshakeFailures[HandshakeFailure.timeout.rawValue] &+= 1
        case .idleTimeout: idleClosed &+= 1
        default: break
        }
    }

    /// A connection refused for `reason`: closed at accept time (`connectionClosed`), or never made (`accept`
    /// failing with EMFILE: libuv closes the waiting connections itself, so this counts at least one).
    func connectionRefused(_ reason: RefusalReason) {
        connectionsRefused[reason.rawValue] &+= 1
    }

    /// One request answered: with success when `error` is nil.
    @inline(__always)
    func countRequest(_ operation: MetricsOperation, error: KVOError.Code?) {
        var outcome = 0
        if let error { outcome = 1 + (KVOError.Code.allCases.firstIndex(of: error) ?? 0) }
        requestCounts[operation.rawValue &* ServerMetrics.outcomeCount &+ outcome] &+= 1
    }

    /// One request of `operation` answered `nanoseconds` after its handling began (`RequestDurations`).
    @inline(__always)
    func requestAnswered(_ operation: MetricsOperation, nanoseconds: UInt64) {
        requestDurations.observe(operation, nanoseconds: nanoseconds)
    }

    /// A request of `operation` took the loop at least `--slow-request`.
    func slowRequest(_ operation: MetricsOperation) {
        slowRequests[operation.rawValue] &+= 1
    }

    /// A loop iteration worked at least `--slow-request`.
    func loopStalled() {
        loopStalls &+= 1
    }

    /// Requests answered with `operation` and `outcome` ("ok" or an error code); for tests and rendering.
    func requests(_ operation: MetricsOperation, outcome: String) -> UInt64 {
        guard let index = ServerMetrics.outcomeIndex(outcome) else { return 0 }
        return requestCounts[operation.rawValue * ServerMetrics.outcomeCount + index]
    }

    private static func outcomeIndex(_ outcome: String) -> Int? {
        if outcome == "ok" { return 0 }
        return KVOError.Code.allCases.firstIndex { $0.rawValue == outcome }.map { $0 + 1 }
    }

    private static func outcomeName(_ index: Int) -> String {
        index == 0 ? "ok" : KVOError.Code.allCases[index - 1].rawValue
    }

    /// A group commit took `nanoseconds`.
    /// Cluster mode: stream entries skipped as batches applied before, breaks of the stream's integrity
    /// (a halt or a divergence), snapshots installed in place.
    private(set) var clusterDuplicatesSkipped: UInt64 = 0
    private(set) var clusterIntegrityFailures: UInt64 = 0
    private(set) var clusterRebootstraps: UInt64 = 0
    /// The store's health, failures and `--max-disk` count (`Server+StorageHealth`).
    var storage = StorageMetrics()
    /// Backups over the network and space given back (`MaintenanceMetrics`).
    var maintenance = MaintenanceMetrics()

    func clusterDuplicateSkipped() { clusterDuplicatesSkipped += 1 }
    func clusterIntegrityFailed() { clusterIntegrityFailures += 1 }
    func clusterRebootstrapped() { clusterRebootstraps += 1 }

    func groupCommitted(nanoseconds: UInt64) {
        groupCommits.observe(nanoseconds: nanoseconds)
    }

    /// The end of a loop iteration's work (the check phase, after the flush), at `now` with the loop idle for `idle`
    /// in all (`ServerClock.nanoseconds`, `ServerClock.idleNanoseconds`): counts the time since the previous one, less
    /// what the loop spent blocked in poll meanwhile, and returns it (nil for the first iteration).
    func iterationEnded(now: UInt64, idle: UInt64) -> UInt64? {
        defer {
            lastIterationEnd = now
            lastIdleTime = idle
        }
        guard lastIterationEnd != 0 else { return nil }
        let elapsed = now &- lastIterationEnd
        let waited = idle &- lastIdleTime
        let worked = elapsed > waited ? elapsed - waited : 0
        loopIterations.observe(nanoseconds: worked)
        return worked
    }

    /// What the server reads when scraped (gauges: current values, not counts).
    struct Gauges {
        var objects: Int
        var observations: Int
        var revision: UInt64
        var historyEntries: Int
        var historyBytes: Int
        var storedBytes: Int
        var outputBufferedBytes: Int
        var inputBufferedBytes: Int
        /// Cluster mode only.
        var cluster: ClusterGauges? = nil
        /// `--max-disk` (0: none).
        var maximumDiskBytes = 0
        /// Presence: sessions held, those of them without a connection (ending after their grace), and the
        /// bytes of their `onDisconnect` actions.
        var sessions = 0
        var detachedSessions = 0
        var sessionActionBytes = 0
    }

    /// A cluster node's integrity, read when `/metrics` is served.
    struct ClusterGauges {
        /// `ClusterHealth.gauge`.
        var state: Int
        var appliedSequence: UInt64
        var checkpointsAgreed: UInt64
        var checkpointDisagreements: UInt64
    }

    /// The Prometheus text exposition (format 0.0.4) of every metric.
    func render(_ gauges: Gauges) -> [UInt8] {
        var out = PrometheusExposition()
        out.family("kvod_connections", type: .gauge, help: "Open client connections, by transport.")
        for transport in ConnectionKind.allCases {
            out.sample("kvod_connections", labels: [("transport", transport.label)], connectionsOpen[transport.rawValue])
        }
        out.family("kvod_connections_accepted_total", type: .counter, help: "Client connections accepted, by transport.")
        for transport in ConnectionKind.allCases {
            out.sample("kvod_connections_accepted_total", labels: [("transport", transport.label)],
                       connectionsAccepted[transport.rawValue])
        }
        out.family("kvod_connections_refused_total", type: .counter,
                   help: "Client connections refused at accept time, by reason (max_connections: over --max-connections; file_descriptors: out of file descriptors).")
        for reason in RefusalReason.allCases {
            out.sample("kvod_connections_refused_total", labels: [("reason", reason.label)], connectionsRefused[reason.rawValue])
        }
        out.family("kvod_tls_handshake_failures_total", type: .counter,
                   help: "TLS connections closed before their handshake finished, by reason (error: refused by OpenSSL; timeout: --tls-handshake-timeout).")
        for failure in HandshakeFailure.allCases {
            out.sample("kvod_tls_handshake_failures_total", labels: [("reason", failure.label)], tlsHandshakeFailures[failure.rawValue])
        }
        out.family("kvod_slow_consumer_disconnects_total", type: .counter,
                   help: "Connections closed because their queued output passed an output limit, by limit.")
        for limit in SlowConsumerLimit.allCases {
            out.sample("kvod_slow_consumer_disconnects_total", labels: [("limit", limit.label)],
                       slowConsumerDisconnects[limit.rawValue])
        }
        out.family("kvod_heartbeats_sent_total", type: .counter,
                   help: "Heartbeats sent to connections quiet for half of --idle-timeout (an event on JSON lines, a ping frame on WebSocket).")
        out.sample("kvod_heartbeats_sent_total", heartbeatsSent)
        out.family("kvod_idle_closed_total", type: .counter,
                   help: "Connections closed for sending nothing, not even an answer to a heartbeat, within --idle-timeout.")
        out.sample("kvod_idle_closed_total", idleClosed)
        out.family("kvod_requests_total", type: .counter,
                   help: "Requests answered, by operation and outcome (ok or the error code); series appear once counted.")
        for operation in MetricsOperation.allCases {
            for outcome in 0..<ServerMetrics.outcomeCount {
                let count = requestCounts[operation.rawValue * ServerMetrics.outcomeCount + outcome]
                guard count > 0 else { continue }
                out.sample("kvod_requests_total", labels: [("op", operation.name), ("outcome", ServerMetrics.outcomeName(outcome))], count)
            }
        }
        out.family("kvod_events_sent_total", type: .counter, help: "Events queued for subscribers (one per recipient).")
        out.sample("kvod_events_sent_total", eventsSent)
        out.family("kvod_event_bytes_sent_total", type: .counter, help: "Bytes of the events queued for subscribers.")
        out.sample("kvod_event_bytes_sent_total", eventBytesSent)
        out.family("kvod_observations", type: .gauge, help: "Live observations, all connections together.")
        out.sample("kvod_observations", gauges.observations)
        out.family("kvod_sessions", type: .gauge,
                   help: "Presence sessions held, by state (attached: a connection holds it; detached: ending after its grace unless resumed).")
        out.sample("kvod_sessions", labels: [("state", "attached")], gauges.sessions - gauges.detachedSessions)
        out.sample("kvod_sessions", labels: [("state", "detached")], gauges.detachedSessions)
        out.family("kvod_session_action_bytes", type: .gauge, help: "Bytes of the onDisconnect actions sessions hold (at most 64 MiB).")
        out.sample("kvod_session_action_bytes", gauges.sessionActionBytes)
        out.family("kvod_objects", type: .gauge, help: "Stored objects.")
        out.sample("kvod_objects", gauges.objects)
        out.family("kvod_stored_bytes", type: .gauge, help: "Bytes the stored data counts against --max-memory.")
        out.sample("kvod_stored_bytes", gauges.storedBytes)
        out.family("kvod_revision", type: .gauge, help: "The store's current revision.")
        out.sample("kvod_revision", gauges.revision)
        out.family("kvod_history_entries", type: .gauge, help: "Changes kept in history for sinceRev resumption.")
        out.sample("kvod_history_entries", gauges.historyEntries)
        out.family("kvod_history_bytes", type: .gauge, help: "Bytes of the changes kept in history.")
        out.sample("kvod_history_bytes", gauges.historyBytes)
        out.family("kvod_output_buffered_bytes", type: .gauge, help: "Output queued for all connections, not yet written.")
        out.sample("kvod_output_buffered_bytes", gauges.outputBufferedBytes)
        out.family("kvod_input_buffered_bytes", type: .gauge, help: "Unfinished request bytes held for all connections.")
        out.sample("kvod_input_buffered_bytes", gauges.inputBufferedBytes)
        out.family("kvod_group_commit_seconds", type: .histogram,
                   help: "Time one group commit (a loop iteration's writes in one SQLite transaction) took.")
        out.histogram("kvod_group_commit_seconds", groupCommits)
        out.family("kvod_loop_iteration_seconds", type: .histogram,
                   help: "Time the event loop worked per iteration (not counting the wait for I/O).")
        out.histogram("kvod_loop_iteration_seconds", loopIterations)
        out.family("kvod_slow_requests_total", type: .counter,
                   help: "Requests whose handling took the loop at least --slow-request, by operation (the last are listed by the slow operation); series appear once counted.")
        for operation in MetricsOperation.allCases where slowRequests[operation.rawValue] > 0 {
            out.sample("kvod_slow_requests_total", labels: [("op", operation.name)], slowRequests[operation.rawValue])
        }
        out.family("kvod_loop_stalls_total", type: .counter,
                   help: "Event loop iterations that worked at least --slow-request (the last are listed by the slow operation).")
        out.sample("kvod_loop_stalls_total", loopStalls)
        requestDurations.render(into: &out)
        storageUsage()?.render(into: &out)
        if let cluster = gauges.cluster {
            out.family("kvod_cluster_integrity_state", type: .gauge,
                       help: "0 applying the stream; 1 halted (the stream delivered does not continue what was applied); 2 diverged (a minority running hash, or a publisher's batches missing); 3 behind a trimmed stream. Not 0: writes refused, /readyz 503.")
            out.sample("kvod_cluster_integrity_state", cluster.state)
            out.family("kvod_cluster_applied_sequence", type: .gauge, help: "The last stream sequence this node applied.")
            out.sample("kvod_cluster_applied_sequence", cluster.appliedSequence)
            out.family("kvod_cluster_duplicates_skipped_total", type: .counter,
                       help: "Stream entries skipped because their batch was applied before (delivered twice).")
            out.sample("kvod_cluster_duplicates_skipped_total", clusterDuplicatesSkipped)
            out.family("kvod_cluster_integrity_failures_total", type: .counter,
                       help: "Times this node stopped applying because the stream did not continue what it applied, or it diverged.")
            out.sample("kvod_cluster_integrity_failures_total", clusterIntegrityFailures)
            out.family("kvod_cluster_rebootstraps_total", type: .counter, help: "Snapshots this node installed in place while serving.")
            out.sample("kvod_cluster_rebootstraps_total", clusterRebootstraps)
            out.family("kvod_cluster_checkpoints_agreed_total", type: .counter,
                       help: "Other nodes' checkpoint claims whose running hash equalled this node's.")
            out.sample("kvod_cluster_checkpoints_agreed_total", cluster.checkpointsAgreed)
            out.family("kvod_cluster_checkpoint_disagreements_total", type: .counter,
                       help: "Other nodes' checkpoint claims whose running hash differed from this node's.")
            out.sample("kvod_cluster_checkpoint_disagreements_total", cluster.checkpointDisagreements)
        }
        storage.render(into: &out, maximumDiskBytes: gauges.maximumDiskBytes)
        maintenance.render(into: &out)
        out.family("kvod_build_info", type: .gauge, help: "Always 1; the labels are this kvod's version and the git commit it was built from (unknown without one).")
        out.sample("kvod_build_info", labels: [("version", KVODVersion.version), ("commit", buildCommit)], 1 as Int)
        renderProcess(into: &out)
        return out.bytes
    }

    /// The `process_*` families (`ProcessStatistics`), with Prometheus' client libraries' names.
    private func renderProcess(into out: inout PrometheusExposition) {
        let process = ProcessStatistics.read()
        out.family("process_start_time_seconds", type: .gauge, help: "Start time of the process since unix epoch in seconds.")
        out.sample("process_start_time_seconds", startTime)
        out.family("process_cpu_seconds_total", type: .counter, help: "Total user and system CPU time spent in seconds.")
        out.sample("process_cpu_seconds_total", process.cpuSeconds)
        if let open = process.openDescriptors {
            out.family("process_open_fds", type: .gauge, help: "Number of open file descriptors.")
            out.sample("process_open_fds", open)
        }
        if let maximum = process.maximumDescriptors {
            out.family("process_max_fds", type: .gauge, help: "Maximum number of open file descriptors.")
            out.sample("process_max_fds", maximum)
        }
        if let resident = process.residentMemoryBytes {
            out.family("process_resident_memory_bytes", type: .gauge, help: "Resident memory size in bytes.")
            out.sample("process_resident_memory_bytes", resident)
        }
        if let virtual = process.virtualMemoryBytes {
            out.family("process_virtual_memory_bytes", type: .gauge, help: "Virtual memory size in bytes.")
            out.sample("process_virtual_memory_bytes", virtual)
        }
    }
}
