/// When the server heartbeats quiet connections and closes silent ones (`--idle-timeout`; docs/protocol.md, "Idle
/// connections and heartbeats"), and the TCP checks that follow the same timeout (`TCPKeepalive`).
///
/// A connection is quiet from the last bytes it sent (`Connection.lastReceivedAt`, stamped by each read: a request, a
/// ping, a WebSocket pong, a partial line alike). Quiet for half the timeout, it gets one heartbeat; quiet for the
/// whole timeout, it is closed (`CloseReason.idleTimeout`), which ends its observations and starts its presence
/// session's grace as any disconnect. The walk over the connections (`Server.sweepIdleConnections`) runs from the
/// housekeeping tick only when the earliest connection can be due (`nextWalk`, a lower bound since reads only move
/// deadlines later), and at most once a second (`minimumWalkInterval`; four times per timeout below 4 s): O(connections)
/// per walk, nothing per request. So a heartbeat leaves between half the timeout and a second after it, and a silent
/// connection is closed between the timeout and a second after it (a quarter of the timeout, when less). A tick that comes more than a second after the one before walks nothing: after
/// the loop stood still, clients are not blamed for bytes the server has not read yet.
///
/// Owned by `Server` (a value stored in it); loop thread only.
struct IdleSweep {
    /// What one connection needs now.
    enum Verdict: Equatable {
        /// Nothing until `at` (ms).
        case nothing(until: UInt64)
        /// Send it a heartbeat; it is closed at `closeAt` (ms) unless it sends something first.
        case heartbeat(closeAt: UInt64)
        /// Close it: nothing for the whole timeout.
        case close
    }

    /// Least time between two walks over the connections: a second, or a quarter of the timeout when that is less
    /// (so that a walk falls between half the timeout and the timeout, and the heartbeat goes out before the close).
    var minimumWalkInterval: UInt64 { max(1, min(1000, timeout / 4)) }

    /// The timeout in milliseconds (0: off: nothing is heartbeated or closed).
    private(set) var timeout: UInt64
    /// The timeout as configured, in seconds (for the close reason).
    private(set) var seconds: Double
    /// TCP's checks for accepted TCP sockets, from the same timeout.
    private(set) var keepalive: TCPKeepalive
    /// No connection can need anything before this (ms, `ServerClock.milliseconds`).
    private(set) var nextWalk: UInt64 = 0
    /// When the timeout last changed (a reload): quiet spells count from then at the earliest, so that a timeout
    /// turned on or lowered closes nobody before it has had its heartbeat and the whole new timeout to answer.
    private var countsFrom: UInt64 = 0

    init(seconds: Double) {
        self.seconds = seconds
        timeout = IdleSweep.milliseconds(seconds)
        keepalive = TCPKeepalive(idleTimeout: seconds)
    }

    private static func milliseconds(_ seconds: Double) -> UInt64 {
        seconds > 0 ? UInt64(min(seconds, 1e9) * 1000) : 0
    }

    /// A new timeout at `now` (SIGHUP): for every connection at once, their quiet spells counted from now at the
    /// earliest; TCP's checks for sockets accepted from now on.
    mutating func change(to seconds: Double, now: UInt64) {
        self.seconds = seconds
        timeout = IdleSweep.milliseconds(seconds)
        keepalive = TCPKeepalive(idleTimeout: seconds)
        countsFrom = now
        nextWalk = 0
    }

    /// Quiet this long, a connection gets its heartbeat.
    var heartbeatAfter: UInt64 { timeout / 2 }

    /// The housekeeping tick before this one (ms).
    private var lastTick: UInt64 = 0
    /// A tick later than this after the one before (the loop stood still: SIGSTOP, a long stall) walks nothing: the
    /// bytes that waited in the kernel meanwhile are read first, and the next tick walks.
    static let maximumTickGap: UInt64 = 1000

    /// Whether the housekeeping tick at `now` walks the connections (called once per tick).
    mutating func isDue(now: UInt64) -> Bool {
        defer { lastTick = now }
        return timeout > 0 && now >= nextWalk && now &- lastTick <= IdleSweep.maximumTickGap
    }

    /// A connection was admitted at `now`: it may need its heartbeat half a timeout later.
    mutating func connectionOpened(now: UInt64) {
        guard timeout > 0 else { return }
        nextWalk = min(nextWalk, now &+ heartbeatAfter)
    }

    /// A walk at `now` found that no connection needs anything before `earliest`.
    mutating func walked(now: UInt64, earliest: UInt64) {
        nextWalk = max(earliest, now &+ minimumWalkInterval)
    }

    /// What a connection that last sent bytes at `lastReceived` and was last heartbeated at `heartbeatSent` (0:
    /// never) needs at `now`.
    func verdict(lastReceived received: UInt64, heartbeatSent: UInt64, now: UInt64) -> Verdict {
        let lastReceived = max(received, countsFrom)
        let quiet = now > lastReceived ? now - lastReceived : 0
        let closeAt = lastReceived &+ timeout
        if quiet >= timeout { return .close }
        // One heartbeat per quiet spell: one sent after the last bytes received (an answer read in the same
        // millisecond as its heartbeat was sent begins a new spell).
        if heartbeatSent > lastReceived { return .nothing(until: closeAt) }
        if quiet >= heartbeatAfter { return .heartbeat(closeAt: closeAt) }
        return .nothing(until: lastReceived &+ heartbeatAfter)
    }
}
