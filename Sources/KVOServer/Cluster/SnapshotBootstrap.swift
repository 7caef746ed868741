import KVOEngine
import KVOJSON
import KVOModel

/// Start-up of a cluster node: whether it replays the stream from the sequence after the one it applied,
/// or first installs the newest snapshot from the snapshot stream, or must not start at all.
///
/// - A node with nothing applied (an empty data directory, or `--in-memory`) installs the newest whole
///   snapshot when there is one, then consumes the stream from the snapshot's sequence + 1.
/// - A node whose next sequence is no longer in the stream (trimmed: the stream's first sequence is past
///   applied + 1) installs the newest snapshot when that covers the gap (its sequence + 1 ≥ the stream's
///   first), replacing its whole state; with none that does, it refuses to start (one line) rather than
///   diverge.
/// - Any other node replays, keeping its own history.
/// - Whenever the stream exists, its settings are checked first (`StreamRequirements`): one that could lose or
///   repeat acknowledged writes refuses the start, one line per problem (docs/design.md, "The stream's
///   settings").
///
/// `run` talks to NATS itself and blocks for up to a few seconds (1.5 s per call that gets no answer: a
/// JetStream cluster still electing its leaders, as when a whole cluster starts at once): it is called from `Server.init`, before
/// the loop serves anything (as the store's load is). When no NATS server answers it starts without a
/// snapshot: should the stream turn out to be trimmed past this node, its first delivery shows it and it installs
/// one in place (`Server.installSnapshotInPlace`).
enum SnapshotBootstrap {
    enum Decision: Equatable {
        /// Consume the stream from applied + 1.
        case replay
        /// Install the snapshot, then consume from its sequence + 1.
        case install
        /// Do not start: why, in one line.
        case refuse(String)
    }

    /// The rule above. `streamFirst`: the log stream's first sequence (nil: no stream yet);
    /// `snapshot`: the newest whole snapshot's sequence (nil: none).
    static func decide(applied: UInt64, streamFirst: UInt64?, snapshot: UInt64?) -> Decision {
        guard let streamFirst else { return .replay }
        let trimmedPastNode = streamFirst > applied + 1
        if let snapshot, snapshot > applied, applied == 0 || trimmedPastNode {
            if snapshot + 1 >= streamFirst { return .install }
            return .refuse("the cluster's stream starts at sequence \(streamFirst) but its newest snapshot covers sequences up to \(snapshot) only: this node cannot get the entries in between (was the stream trimmed by hand?)")
        }
        if trimmedPastNode {
            return .refuse("this node applied the cluster's stream up to sequence \(applied), the stream now starts at \(streamFirst) (trimmed) and no snapshot covers the entries in between: start the node on an empty data directory once a snapshot exists, or check --cluster-stream")
        }
        return .replay
    }

    /// What `run` found: the snapshot to install (nil: replay) or why the node must not start.
    enum Outcome {
        case replay
        case install(ClusterSnapshot)
        case refuse(String)
    }

    /// The newest whole snapshot in the snapshot stream (nil: none), through `session`; problems with the
    /// chunks (skipped) go to `log`.
    private static func newestSnapshot(_ configuration: ClusterConfiguration, session: JetStreamSession,
                                       log: (String) -> Void) throws(JetStreamSessionError) -> ClusterSnapshot? {
        var assembler = SnapshotAssembler()
        if let snapshots = try session.streamBounds(configuration.snapshotStream), snapshots.first <= snapshots.last {
            for sequence in snapshots.first...snapshots.last {
                if let data = try session.message(configuration.snapshotStream, sequence: sequence) {
                    assembler.add(data, streamSequence: sequence)
                }
            }
        }
        for problem in assembler.problems { log(problem) }
        return assembler.newest()
    }

    /// For a node that re-bootstraps while it serves (the bridge's thread): the newest whole snapshot, or
    /// nil and why not.
    static func newest(_ configuration: ClusterConfiguration) -> (ClusterSnapshot?, String?) {
        do throws(JetStreamSessionError) {
            let session = try JetStreamSession(servers: configuration.servers, timeoutMilliseconds: 2000, persistent: false)
            defer { session.close() }
            var problems: [String] = []
            let snapshot = try newestSnapshot(configuration, session: session) { problems.append($0) }
            return (snapshot, snapshot == nil ? (problems.first ?? "the snapshot stream holds no whole snapshot") : nil)
        } catch {
            return (nil, "\(error)")
        }
    }

    /// Why the node must not start on a stream with settings `config` (`StreamRequirements`): nil when none of
    /// its problems refuses. When one does, every problem is logged, one line each, warnings included (so that
    /// one restart shows them all); otherwise the warnings are left to the bridge, which checks the stream
    /// again when it starts and logs them then.
    static func refusal(of config: JSONValue, _ configuration: ClusterConfiguration, log: (String, Bool) -> Void) -> String? {
        let problems = StreamRequirements(configuration).problems(in: config)
        let refusing = problems.filter(\.refuses)
        guard !refusing.isEmpty else { return nil }
        for problem in problems { log("cluster: \(problem.text)", true) }
        return "the settings of stream '\(configuration.stream)' could lose or repeat acknowledged writes (\(refusing.count == 1 ? "the problem" : "the \(refusing.count) problems") logged above): correct them, or give this cluster another --cluster-stream (docs/design.md, \"The stream's settings\")"
    }

    /// Asks NATS for the stream's first sequence and, when the node may need one, reads the snapshot
    /// stream and assembles its newest whole snapshot. `log(text, isError)` reports what it did.
    static func run(_ configuration: ClusterConfiguration, applied: UInt64, log: (String, Bool) -> Void) -> Outcome {
        let session: JetStreamSession
        do throws(JetStreamSessionError) {
            session = try JetStreamSession(servers: configuration.servers, timeoutMilliseconds: 1500, persistent: false)
        } catch {
            log("cluster: \(error) at start-up; starting from sequence \(applied + 1) without checking for a snapshot (if the stream was trimmed past it, this node installs a snapshot in place when it finds the gap)", true)
            return .replay
        }
        defer { session.close() }
        do throws(JetStreamSessionError) {
            guard let bounds = try session.streamBounds(configuration.stream) else { return .replay }
            if let refusal = refusal(of: try session.streamConfiguration(configuration.stream), configuration, log: log) {
                return .refuse(refusal)
            }
            guard applied == 0 || bounds.first > applied + 1 else { return .replay }
            let newest = try newestSnapshot(configuration, session: session) { log("cluster: \($0)", true) }
            switch decide(applied: applied, streamFirst: bounds.first, snapshot: newest?.sequence) {
            case .replay: return .replay
            case .install: return .install(newest!)
            case let .refuse(reason): return .refuse(reason)
            }
        } catch {
            log("cluster: \(error) at start-up; starting from sequence \(applied + 1) without a snapshot (if the stream was trimmed past it, this node installs a snapshot in place when it finds the gap)", true)
            return .replay
        }
    }
}
