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

extension ConnectionState {
    /// The `disconnected` reason when a heartbeat `ping` went unanswered for `seconds` (the configuration's
    /// `heartbeatTimeout`): `no answer to ping within 0.5 s`. One definition, so that code showing its own
    /// text for this case (kvoclient's "timed out waiting for the server") can recognise it.
    public static func heartbeatTimeoutReason(after seconds: Double) -> String {
        "no answer to ping within \(seconds) s"
    }
}
