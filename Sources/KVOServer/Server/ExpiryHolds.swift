import KVOModel

/// Requests waiting for an expiry backlog (`Server+Expiry`). When more objects are due than one step expires
/// (`Server.maximumExpiriesPerStep`), a single node does not expire them all in one stall of the loop, nor lets the
/// request read one of them: the request is held here, its connection stops reading (`ReadPause.expiry`), and each
/// loop iteration's check phase expires one more step until none is due; then the held requests are handled in
/// the order they arrived, with their first arrival as their start (`kvod_request_duration_seconds`).
///
/// At most one request per connection (its reading is paused behind it), so what is held is bounded by the
/// connection limit times the line limit. Owned by `Server`; loop thread only.
struct ExpiryHolds {
    /// A request line held, and when it was first received (`uv_hrtime`).
    struct Held {
        let connection: ConnectionID
        let line: [UInt8]
        let started: UInt64
    }

    private var held: [Held] = []

    var isEmpty: Bool { held.isEmpty }
    var count: Int { held.count }

    /// Holds `line` of `connection` (whose reading the caller pauses).
    mutating func hold(_ line: UnsafeBufferPointer<UInt8>, for connection: ConnectionID, started: UInt64) {
        held.append(Held(connection: connection, line: Array(line), started: started))
    }

    /// Every held request, in arrival order, no longer held.
    mutating func takeAll() -> [Held] {
        defer { held = [] }
        return held
    }
}
