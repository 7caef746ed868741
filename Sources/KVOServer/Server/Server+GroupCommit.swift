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
        guard storage.keepsWrites else { return }
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
        groupCommit.commitStarted(at: clock.nanoseconds)
        commitOrRollBack(batch)
    }

    /// Whether this iteration's writes wait for a later group commit (`GroupCommitCadence.holds`: the last one
    /// started less than an interval ago). Then every reply and event waits with the writes, as
    /// `mayWriteImmediately` already makes output about uncommitted writes wait, and input arriving before the
    /// cadence's timer fires runs the check phase, which commits once it is due. A hold pays only when more writes
    /// come during it without waiting for replies (a stream, a pipelining client). Never while stopping, in
    /// cluster mode (the interval is 0 there), for a user change, or with nothing to commit.
    func holdsGroupCommit() -> Bool {
        guard groupCommit.intervalNanoseconds > 0, !isStopping, uncommittedUsers.isEmpty,
              handler.engine.hasUncommittedWrites else { return false }
        return groupCommit.holds(now: clock.nanoseconds, armsTimer: !clock.isManual)
    }

    /// Closes the store, with its background work (after the loop has run dry: nothing of it is queued), and
    /// logs what it did about its files (a lost database's write-ahead log set aside).
    func closeStore() {
        store.close()
        for note in store.closingNotes { logger.warning("\(PrintableText.escaped(note, limit: 1000))") }
    }

    /// End of a loop iteration: commit this iteration's writes, then one write per connection with
    /// output. `holding`: whether the group commit may wait for the writes of the next iterations
    /// (`holdsGroupCommit()`); then nothing is committed or written now, and the output waits with them.
    func flushConnections(holding: Bool = true) {
        if let cluster { publishClusterBatch(cluster) }
        if holding && holdsGroupCommit() { return }
        groupCommit.disarm()
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
        guard heldInput.hasResumedConnections else { return }
        for connection in heldInput.takeResumedConnections() { connection.replayHeldInput() }
        heldInput.stopPollingWhenNothingIsHeld()
    }
}
