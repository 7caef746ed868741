/// Where a `KVOClient`'s connection stands; `KVOClient.states` delivers each transition. A value.
public enum ConnectionState: Sendable, Equatable {
    /// The first connection is being made.
    case connecting
    /// Connected (and logged in, with credentials); requests and observations flow.
    case connected
    /// The connection was lost, for the reason given; reconnection follows unless it is off.
    case disconnected(reason: String)
    /// Reconnection attempt `attempt` (1-based) is under way.
    case reconnecting(attempt: Int)
    /// The client was closed: final.
    case closed
}
