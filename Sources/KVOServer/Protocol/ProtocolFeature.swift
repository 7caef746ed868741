/// The protocol features `hello`'s reply announces (`features`, docs/protocol.md, "Operations"): the optional
/// fields a client may send beyond each operation's basics. The server refuses a field it does not know
/// (`bad_request`), so a client sends one of these only when the server announced it, and fails locally
/// otherwise. A feature is announced when the operations table declares its field: the list cannot claim what the
/// decoder would refuse.
///
/// A value; any thread.
package enum ProtocolFeature: String, CaseIterable, Sendable {
    /// `atLeastRev` on `get`, `list`, `info` and `observe` (docs/protocol.md, "Cluster").
    case atLeastRev
    /// `hello`'s `events: "compact"` (docs/protocol.md, "Compact events").
    case compactEvents
    /// `ifExists`, `ifAbsent`, `ifEquals` and `ifRev` on writes (docs/protocol.md, "Conditional writes").
    case conditions
    /// `create` with `ephemeral: true` (docs/protocol.md, "Presence").
    case ephemeral
    /// `observe` with `pattern` and `where` (docs/protocol.md, "Live queries").
    case liveQueries
    /// `session`, `onDisconnect`, `cancelOnDisconnect` and `endSession` (docs/protocol.md, "Presence").
    case sessions
    /// `signal` (docs/protocol.md, "Signals").
    case signals
    /// `observe` with `sinceRev` (docs/protocol.md, "Resuming").
    case sinceRev
    /// `ttl` on `create` and `set`, and `touch` (docs/protocol.md, "Expiry").
    case ttl

    /// The row and field whose declaration is the feature.
    private var declaredBy: (ProtocolOperation, RequestField) {
        switch self {
        case .atLeastRev: (.get, .atLeastRev)
        case .compactEvents: (.hello, .events)
        case .conditions: (.set, .ifEquals)
        case .ephemeral: (.create, .ephemeral)
        case .liveQueries: (.observe, .where)
        case .sessions: (.onDisconnect, .request)
        case .signals: (.signal, .value)
        case .sinceRev: (.observe, .sinceRev)
        case .ttl: (.set, .ttl)
        }
    }

    /// Whether the operations table declares the feature's field.
    package var isDeclared: Bool {
        let (operation, field) = declaredBy
        return operation.declaration.acceptedFields & field.bit != 0
    }

    /// What `hello` answers: the declared features' names, sorted.
    package static let announced: [String] = allCases.filter(\.isDeclared).map(\.rawValue).sorted()
}
