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

    /// Most objects expired in one step before a request or in one check phase of a backlog (`ExpiryHolds`): the
    /// same bound as a housekeeping tick, so no request makes the loop stall for more than a tick's work.
    static let maximumExpiriesPerStep = maximumExpiriesPerTick

    /// Before a request is handled (one comparison per request, `handleLine`): when an object may be due
    /// (`KVOEngine.expiryCheckAt` reached), expires what is due now, so that no read — get, list, info, an
    /// observation's initial value, a live query, a reference followed, a condition, the digest — sees an object past
    /// its deadline, whatever the housekeeping tick has done. Returns whether the request may go on now.
    ///
    /// A single node expires at most `maximumExpiriesPerStep` here, its events and commit going with the
    /// iteration's. When more are due (many objects with one deadline), it returns false: the caller holds the
    /// request (`ExpiryHolds`) and each later check phase expires one more step (`continueExpiryBacklog`), so the
    /// request still reads none of them and the loop never stalls for the whole backlog. A cluster node submits
    /// them (each once a second at most) and goes on: its reads may show the object until the stream applies the
    /// `expire`, one stream round trip (docs/design.md, "The clock").
    func expireDueObjectsBeforeReads() -> Bool {
        if cluster != nil {
            expireDueObjects(limit: Server.maximumExpiriesPerTick, flushing: false)
            return true
        }
        expireDueObjects(limit: Server.maximumExpiriesPerStep, flushing: false)
        return !hasUnexpiredDueObjects
    }

    /// Single node: whether an object is past its deadline and still there while the server may write (while the
    /// store refuses writes, nothing can be expired, and requests are not held for it).
    var hasUnexpiredDueObjects: Bool {
        guard takesServerWrites, let next = handler.engine.nextExpiryCheck else { return false }
        return next <= clock.wallMilliseconds
    }

    /// Holds `line` behind the expiry backlog (`expireDueObjectsBeforeReads` returned false): the connection stops
    /// reading, and the check phase keeps the loop polling without blocking until the backlog is worked off.
    func holdForExpiryBacklog(_ line: UnsafeBufferPointer<UInt8>, from connection: Connection, started: UInt64) {
        heldInput.holdForExpiry(line, for: connection.id, started: started)
        connection.pauseReading(.expiry)
    }

    /// Check phase: while requests are held behind the expiry backlog, expires one more step; once none is due,
    /// handles them in arrival order and lets their connections read again (their later lines follow in this
    /// check phase's `replayHeldInput`).
    func continueExpiryBacklog() {
        guard !heldInput.expiryHolds.isEmpty else { return }
        if hasUnexpiredDueObjects {
            expireDueObjects(limit: Server.maximumExpiriesPerStep, flushing: false)
            if hasUnexpiredDueObjects { return }
        }
        for item in heldInput.takeExpiryHolds() {
            guard let connection = connection(item.connection)?.takeUnretainedValue(), !connection.isClosing else { continue }
            // Resumed first: a request that is held again pauses it again; lines held behind this one are
            // handed out after it (`replayHeldInput`).
            connection.resumeReading(.expiry)
            item.line.withUnsafeBufferPointer { handleLine($0, from: connection, startedAt: item.started) }
        }
        heldInput.stopPollingWhenNothingIsHeld()
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
