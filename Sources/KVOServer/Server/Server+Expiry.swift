import CLibUV
import KVOEngine
import KVOJSON
#if canImport(Glibc)
import Glibc
#endif

/// Expiry on the server's side (docs/protocol.md, "Expiry"; the engine's part is `KVOEngine+Expiry`): the
/// write time each write is applied with, and the `expire` writes for objects whose time to live ended.
///
/// *Time.* A single node applies a write at `loopWallClock`: the loop's cached time (`uv_now`, read once per
/// iteration) plus the wall clock's offset from it, taken again every housekeeping tick, so no write reads a
/// clock. A cluster node applies each stream entry at the `time` its publisher stamped, so every node
/// computes the same deadlines (`applyClusterEntry`).
///
/// *Expiring.* Every housekeeping tick (100 ms) asks the engine for the objects due now; for each it sends
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

    /// The wall clock (ms since 1970) as the loop sees it: `uv_now` plus `wallClockOffset`.
    var loopWallClock: Int64 { Int64(bitPattern: uv_now(loop.raw)) &+ wallClockOffset }

    /// Takes the wall clock's offset from the loop's clock again (every housekeeping tick).
    func refreshWallClockOffset() {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let wall = Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
        wallClockOffset = wall &- Int64(bitPattern: uv_now(loop.raw))
    }

    /// Sends `expire` for every object due now (housekeeping).
    func expireDueObjects() {
        let engine = handler.engine
        guard engine.expiringObjectCount > 0, takesServerWrites else { return }
        let due = engine.dueExpiries(now: loopWallClock, retry: Server.expiryRetry, limit: Server.maximumExpiriesPerTick)
        guard !due.isEmpty else { return }
        // Committed and sent now (a cluster node's `expire`s published now), not at the next check phase, after a
        // poll that may wait for the next tick.
        defer { flushConnections() }
        for (object, changedRev) in due {
            serverWrite(JSONWriter.bytes(.object(["op": "expire", "object": .string(object), "changedRev": .int(Int64(changedRev))])),
                        as: Server.serverUser)
        }
    }
}
