/// Whether a cluster node applies the stream, and if not, why (docs/design.md, "Integrity of the stream").
///
/// Anything but `applying` makes the node refuse writes and `atLeastRev` reads (`unavailable`, with the
/// reason), answer `/readyz` with 503 and the reason, and report it in `kvod_cluster_integrity_state`;
/// plain reads and observations go on serving the state it has (consistent up to its applied sequence, or
/// suspect when diverged: `digest` says which). A value; loop thread.
enum ClusterHealth: Equatable {
    /// Applying the stream as it is delivered.
    case applying
    /// Stopped before applying something that does not continue what it applied (a copy of the stream
    /// numbered differently, a gap): nothing wrong was applied; it consumes the stream again, from one
    /// entry before the next, until a copy continues it.
    case halted(String)
    /// What it applied may differ from the other nodes' (its running hash is a minority's, batches of a
    /// publisher went missing, the stream was trimmed past it): it installs the newest snapshot whose running
    /// hash the majority claimed, then applies from there.
    case diverged(String)
    /// The stream no longer holds the entries after what it applied (trimmed behind a snapshot while it was
    /// away): nothing wrong was applied, but it cannot go on; it installs the newest snapshot, as `diverged`.
    case behind(String)

    /// Whether the node waits for a snapshot to install (`diverged`, `behind`).
    var needsSnapshot: Bool {
        switch self {
        case .diverged, .behind: true
        case .applying, .halted: false
        }
    }

    /// The gauge's value: 0 applying, 1 halted, 2 diverged, 3 behind.
    var gauge: Int {
        switch self {
        case .applying: 0
        case .halted: 1
        case .diverged: 2
        case .behind: 3
        }
    }

    /// One line for `/readyz`, `digest` and refusals; nil while applying.
    var reason: String? {
        switch self {
        case .applying: nil
        case let .halted(reason): "halted: \(reason)"
        case let .diverged(reason): "diverged: \(reason)"
        case let .behind(reason): "behind the stream: \(reason)"
        }
    }

    /// `status`'s name for it: applying, halted, diverged, behind.
    var stateName: String {
        switch self {
        case .applying: "applying"
        case .halted: "halted"
        case .diverged: "diverged"
        case .behind: "behind"
        }
    }
}
