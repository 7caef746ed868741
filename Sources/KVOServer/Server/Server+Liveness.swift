/// Dead peers noticed in bounded time (docs/protocol.md, "Idle connections and heartbeats"): the idle sweep that
/// heartbeats quiet connections and closes silent ones (`IdleSweep`), from the housekeeping tick. TCP keepalive and
/// `TCP_USER_TIMEOUT` are set at accept (`Server.admit`, `TCPKeepalive`). Loop thread only, like the rest of `Server`.
extension Server {
    /// Walks the open connections when one can be due: heartbeats those quiet for half the idle timeout (once per
    /// quiet spell) and closes those that sent nothing for all of it. A connection whose reading the server paused
    /// (back-pressure, a password check, a backup's copy) is not quiet by its own doing: it counts as heard from now.
    func sweepIdleConnections(now: UInt64) {
        guard idleSweep.isDue(now: now) else { return }
        var earliest = UInt64.max
        for index in slots.indices {
            guard let connection = slots[index]?.takeUnretainedValue(), !connection.isClosing else { continue }
            if connection.isReadingPaused { connection.lastReceivedAt = max(connection.lastReceivedAt, now) }
            switch idleSweep.verdict(lastReceived: connection.lastReceivedAt, heartbeatSent: connection.heartbeatSentAt, now: now) {
            case let .nothing(until):
                earliest = min(earliest, until)
            case let .heartbeat(closeAt):
                if connection.sendHeartbeat() { metrics.heartbeatsSent &+= 1 }
                connection.heartbeatSentAt = now
                // An event stream's client sends nothing by design: its heartbeat counts as heard, so it gets one
                // every half idle timeout and is never closed for silence; TCP_USER_TIMEOUT (= the idle timeout)
                // resets it when that heartbeat stays unacknowledged.
                if connection.framing?.isOneWay == true { connection.lastReceivedAt = now }
                earliest = min(earliest, closeAt)
            case .close:
                connection.close(reason: .idleTimeout(seconds: idleSweep.seconds))
            }
        }
        idleSweep.walked(now: now, earliest: earliest)
    }
}
