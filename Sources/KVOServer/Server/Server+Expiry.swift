import CLibUV
import KVOEngine
import KVOJSON
#if canImport(Glibc)
import Glibc
#endif

/// Expiry on the server's side (docs/protocol.md, "Expiry"; the engine's part is `KVOEngine+Expiry`): the
/// write time each write is applied with, and the `expire` writes for objects whose time to live ended.
///
/// *Time.* A single node applies a write at `clock.wallMilliseconds` (`ServerClock`): the loop's cached time
/// (`uv_now`, read once per iteration) plus the wall clock's offset from it, taken again every housekeeping tick,
/// so no write reads a clock. A cluster node applies each stream entry at the `time` its publisher stamped, so every node
/// computes the same deadlines (`applyClusterEntry`).
///
/// *Expiring.* Before each request when one may be due (`expireDueObjectsBeforeReads`), at start-up, and every
/// housekeeping tick (100 ms), the server asks the engine for the objects due now; for each it sends
/// `{"op":"expire","object":…,"changedRev":R}` as the server: a single node applies it at once, a cluster node
/// submits it to the stream like a client's write (every node that finds the object due does, and the first
/// in the stream deletes it: the others are refused alike everywhere). An object still there a second later
/// is asked for again. Nothing is sent while writes are refused (storage full, the stream unavailable).
/// Loop thread only.
extension Server {
    /// The user an `expire` from the stream acts as: the server itself (no user can have this name).
    static let serverUser = "$kvod"

    /// Milliseconds before an object found due and still there is asked for again.
    static let expiryRetry: Int64 = 1000

    /// Most objects expired per housekeeping tick (so 20,000 a second): a million objects with the same
    /// deadline are deleted over 50 s of short steps rather than in one stall of the loop (as Redis's active
    /// expiry works in time-bounded steps).
    static let maximumExpiriesPerTick = 2_000

    /// Before a request is handled (one comparison per request, `handleLine`) and at start-up: when an object may be
    /// due (`KVOEngine.expiryCheckAt` reached), expires what is due now, so that no read — get, list, info, an
    /// observation's initial value, a live query, a reference followed, a condition, the digest — sees an object past
    /// its deadline, whatever the housekeeping tick has done. A single node applies every `expire` due at once (no
    /// bound per call: a read must not see one of them), its events and commit going with the iteration's. A cluster
    /// node submits them (each once a second at most): its reads may show the object until the stream applies the
    /// `expire`, one stream round trip (docs/design.md, "The clock").
    func expireDueObjectsBeforeReads() {
        if cluster != nil {
            expireDueObjects(limit: Server.maximumExpiriesPerTick, flushing: false)
        } else {
            expireDueObjects(limit: .max, flushing: false)
        }
    }

    /// Sends `expire` for every object due now, at most `limit` (housekeeping: `maximumExpiriesPerTick`, flushed at
    /// once; before a request: not flushed, going out with the request's).
    func expireDueObjects(limit: Int = Server.maximumExpiriesPerTick, flushing: Bool = true) {
        let engine = handler.engine
        guard engine.expiringObjectCount > 0, takesServerWrites else { return }
        let due = engine.dueExpiries(now: clock.wallMilliseconds, retry: Server.expiryRetry, limit: limit)
        guard !due.isEmpty else { return }
        // Committed and sent now (a cluster node's `expire`s published now), not at the next check phase, after a
        // poll that may wait for the next tick.
        defer { if flushing { flushConnections() } }
        for (object, changedRev) in due {
            serverWrite(JSONWriter.bytes(.object(["op": "expire", "object": .string(object), "changedRev": .int(Int64(changedRev))])),
                        as: Server.serverUser)
        }
    }
}
