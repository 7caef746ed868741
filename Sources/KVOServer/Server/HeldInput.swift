import CLibUV
import KVOModel

/// Input that waits for the next check phase, when no request is being handled: connections resumed with lines
/// held from before their pause, and requests held behind the expiry backlog (`ExpiryHolds`). While any waits,
/// its idle handle keeps the loop polling without blocking, so that the check phase comes round at once
/// (`Server.replayHeldInput`, `Server.continueExpiryBacklog`).
///
/// Owned by `Server` (a value stored in it, the idle handle allocated with it and closed by it); loop thread only.
struct HeldInput {
    /// Active while anything is held.
    let idleHandle: UnsafeMutablePointer<uv_idle_t>
    /// Connections resumed with lines held from before their pause (`Connection.replayHeldInput()`), in the
    /// order they resumed.
    private var resumedConnections: [Connection] = []
    /// Requests waiting for the expiry backlog to be worked off (single node; `Server+Expiry`).
    private(set) var expiryHolds = ExpiryHolds()

    /// Does nothing: an active idle handle only keeps the loop from blocking in poll.
    static let idleCallback: uv_idle_cb = { _ in }

    init() {
        idleHandle = allocateHandle(uv_idle_t.self, kind: UV_IDLE)
    }

    var hasResumedConnections: Bool { !resumedConnections.isEmpty }

    /// `connection` resumed with lines held: its lines are handed out at the next check phase.
    mutating func connectionResumed(_ connection: Connection) {
        if resumedConnections.isEmpty { uv_idle_start(idleHandle, HeldInput.idleCallback) }
        resumedConnections.append(connection)
    }

    /// The connections resumed since the last check phase, in order, no longer held.
    mutating func takeResumedConnections() -> [Connection] {
        let connections = resumedConnections
        resumedConnections.removeAll(keepingCapacity: true)
        return connections
    }

    /// Holds `line` of `connection` behind the expiry backlog (the caller pauses its reading).
    mutating func holdForExpiry(_ line: UnsafeBufferPointer<UInt8>, for connection: ConnectionID, started: UInt64) {
        expiryHolds.hold(line, for: connection, started: started)
        uv_idle_start(idleHandle, HeldInput.idleCallback)
    }

    /// The requests held behind the expiry backlog, in arrival order, no longer held.
    mutating func takeExpiryHolds() -> [ExpiryHolds.Held] {
        expiryHolds.takeAll()
    }

    /// Stops the idle handle once nothing waits for a check phase (so the loop may block in poll again).
    func stopPollingWhenNothingIsHeld() {
        if resumedConnections.isEmpty, expiryHolds.isEmpty { uv_idle_stop(idleHandle) }
    }
}
