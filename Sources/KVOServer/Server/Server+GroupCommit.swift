import CLibUV
import KVOJSON
import Logging
#if canImport(Glibc)
import Glibc
import KVOEngine
import KVOModel
#endif

/// The end of a loop iteration: group commit to the store and its upkeep, flushing connections, replaying held input.
/// Loop thread only, like the rest of `Server`.
extension Server {
    /// Group commit: makes every write accepted during this loop iteration durable, in one
    /// transaction, before any reply or event about it leaves the server. When the store refuses, the
    /// writes are stored after all (the reserve given back) or undone, and later writes are refused
    /// (`commitOrRollBack`, `StorageHealth`): nothing is acknowledged that is not stored.
    func commitPendingWrites() {
        guard storeKeepsWrites else { return }
        var batch = handler.engine.takeCommitBatch()
        if let cluster, cluster.appliedSequence != cluster.committedSequence {
            batch.streamSequence = cluster.appliedSequence
            batch.streamIntegrity = cluster.integrity.encodedState
        }
        if !uncommittedUsers.isEmpty {
            for name in uncommittedUsers.sorted() { batch.users[name] = .some(users.user(named: name)) }
            uncommittedUsers.removeAll()
        }
        if !sessions.uncommitted.isEmpty {
            for id in sessions.uncommitted { batch.sessions[id] = .some(sessions.session(id)?.record) }
            sessions.uncommitted.removeAll()
        }
        guard !batch.isEmpty || batch.streamSequence != nil else { return }
        let now = clock.nanoseconds
        lastGroupCommitStart = now
        if groupCommitIntervalNanoseconds > 0 {
            // A hold that no writer used (each waits for its reply before the next write) only delayed it:
            // none for a while.
            if groupCommitWasHeld && !writerRepeatedSinceCommit {
                groupCommitHoldsPausedUntil = now &+ groupCommitIntervalNanoseconds &* Server.groupCommitHoldPauseIntervals
            }
            groupCommitWasHeld = false
            writerRepeatedSinceCommit = false
            writersSinceCommit.removeAll(keepingCapacity: true)
        }
        commitOrRollBack(batch)
    }

    /// How long holds pause after a hold no writer used, in intervals: 200 (100 ms at the default 0.5 ms), so
    /// that a writer that waits for each reply loses one probing hold per pause (the interval, rounded up to
    /// libuv's millisecond timer: about 1 – 2 ms in 100, where 50 intervals cost it 3 – 9 % of its rate).
    static let groupCommitHoldPauseIntervals: UInt64 = 200

    /// A write request from `connection` (with a cadence only): remembers whether its writer wrote before,
    /// since the last group commit.
    func noteWriterForGroupCommit(_ connection: ConnectionID) {
        if !writersSinceCommit.insert(connection).inserted { writerRepeatedSinceCommit = true }
    }

    /// The group commit's cadence under a steady stream of writes (docs/design.md, "Durability"): whether
    /// this iteration's writes wait for a later group commit, because the last one started less than
    /// `groupCommitIntervalNanoseconds` ago. Then `groupCommitTimer` is armed for when it is due (input
    /// arriving before that runs the check phase, which commits once it is due), and every reply and event
    /// waits with the writes, as `mayWriteImmediately` already makes output about uncommitted writes wait.
    /// A write after a quieter spell is never held: at most one commit per interval, not one per write.
    ///
    /// A hold pays only when more writes come during it without waiting for replies (a stream, a pipelining
    /// client). After a hold in which no writer wrote twice (writers that each wait for their reply), holds
    /// pause for `groupCommitHoldPauseIntervals` intervals, unless a writer writes twice before a commit.
    /// Never while stopping, in cluster mode (the interval is 0 there) or for a user change.
    func holdsGroupCommit() -> Bool {
        guard groupCommitIntervalNanoseconds > 0, !isStopping, uncommittedUsers.isEmpty,
              handler.engine.hasUncommittedWrites else { return false }
        let now = clock.nanoseconds
        let elapsed = now &- lastGroupCommitStart
        guard elapsed < groupCommitIntervalNanoseconds else { return false }
        if !groupCommitWasHeld {
            guard now >= groupCommitHoldsPausedUntil || writerRepeatedSinceCommit else { return false }
            groupCommitWasHeld = true
        }
        if !groupCommitTimerArmed && !clock.isManual {
            // libuv's timers count whole milliseconds: the timer may fire up to a millisecond late, and
            // only when no input wakes the loop before (under a steady stream the check phase commits first).
            // A manual clock arms none: `advanceTime(by:)` commits once the interval has passed on it.
            let remaining = groupCommitIntervalNanoseconds - elapsed
            let milliseconds = (remaining + 999_999) / 1_000_000
            uv_timer_start(groupCommitTimer, Server.groupCommitCallback, milliseconds, 0)
            groupCommitTimerArmed = true
        }
        return true
    }

    /// Closes the store, with its background work (after the loop has run dry: nothing of it is queued).
    func closeStore() {
        store.close()
    }

    /// End of a loop iteration: commit this iteration's writes, then one write per connection with
    /// output. `holding`: whether the group commit may wait for the writes of the next iterations
    /// (`holdsGroupCommit()`); then nothing is committed or written now, and the output waits with them.
    func flushConnections(holding: Bool = true) {
        if let cluster { publishClusterBatch(cluster) }
        if holding && holdsGroupCommit() { return }
        if groupCommitTimerArmed {
            uv_timer_stop(groupCommitTimer)
            groupCommitTimerArmed = false
        }
        commitPendingWrites()
        eventBytesSinceFlush = 0
        guard !flushQueue.isEmpty else { return }
        swap(&flushQueue, &flushing)
        for connection in flushing { connection.flush() }
        flushing.removeAll(keepingCapacity: true)
    }

    /// Fast path for a large burst (many pipelined writes fanned out to many subscribers in one loop
    /// iteration): once the events queued since the last flush pass `earlyFlushBytes`, write them
    /// now instead of at the end of the iteration, so the kernel copies output that is still in the
    /// CPU cache and the chunks go back to the pool to be reused while warm. Written at the end, a
    /// burst's output (tens of MB at 100 subscribers) is cold by the time it is copied. Only when
    /// `mayWriteImmediately`: output about writes not yet durable still waits for the group commit.
    /// Per connection the order is unchanged (a flush writes what is queued, in order).
    @inline(__always)
    func flushEarlyIfOutputIsLarge() {
        guard eventBytesSinceFlush >= Server.earlyFlushBytes, mayWriteImmediately else { return }
        flushConnections()
    }

    /// Event bytes (tails, all recipients together) that trigger `flushEarlyIfOutputIsLarge()`.
    /// 4 MiB measured best at 100 subscribers (40 KiB per connection per write): 1 MiB and less
    /// paid more in `write` calls than they saved in cache misses, 8 MiB and more (or never
    /// flushing early) left the output cold (docs/performance.md, optimisation steps).
    static let earlyFlushBytes = 4 << 20

    /// Hands out the lines held by connections resumed since the last check phase (each may pause
    /// again, holding the rest for a later round). Runs before the group commit, so their replies go
    /// out in this iteration's flush.
    func replayHeldInput() {
        guard !heldInputQueue.isEmpty else { return }
        let connections = heldInputQueue
        heldInputQueue.removeAll(keepingCapacity: true)
        for connection in connections { connection.replayHeldInput() }
        stopPollingWhenNothingIsHeld()
    }

    /// Stops the idle handle once neither resumed connections' lines nor requests behind the expiry backlog wait
    /// for a check phase (so the loop may block in poll again).
    func stopPollingWhenNothingIsHeld() {
        if heldInputQueue.isEmpty, expiryHolds.isEmpty { uv_idle_stop(replayIdleHandle) }
    }
}
