import CLibUV
import KVOEngine
import KVOJSON
import KVOModel
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// What a cluster node does when the stream it is delivered does not continue what it applied
/// (`StreamIntegrity`, `ClusterHealth`; docs/design.md, "Integrity of the stream"): halting and consuming
/// again, diverging and installing a snapshot in place. Loop thread only, like the rest of `Server`.
extension Server {
    /// The first delivery of a subscription, at the applied sequence: it must be the batch applied there.
    func checkContinuity(_ cluster: ClusterReplicator, at sequence: UInt64, data: [UInt8]) {
        let expected = cluster.integrity.state.lastBatch
        if !expected.isEmpty {
            let found = (try? ReplicationEntry.decode(data))?.batch
            guard found == expected else {
                halt(cluster, "the stream's entry at sequence \(sequence), where this node applied batch \(expected), is \(found.map { "batch \($0)" } ?? "not an entry"): the copy of the stream serving this node is numbered differently")
                return
            }
        }
        resumeIfHalted(cluster)
    }

    /// A halted node whose new subscription continues what it applied applies again.
    func resumeIfHalted(_ cluster: ClusterReplicator) {
        guard case .halted = cluster.health else { return }
        cluster.health = .applying
        logger.notice("cluster: the stream continues what this node applied (sequence \(cluster.appliedSequence)); applying and taking writes again")
    }

    /// Stops applying before something that does not continue what was applied: nothing wrong was applied.
    /// Housekeeping subscribes again (`retryIntegrityRepair`) until a copy continues it. `escalates`: whether
    /// halting there again and again makes the node install a snapshot (a position that no copy continues);
    /// not for an entry no node can apply (one that does not decode, of an unknown version: a snapshot taken
    /// before it would bring the node back to it).
    func halt(_ cluster: ClusterReplicator, _ reason: String, escalates: Bool = true) {
        cluster.awaitingContinuity = false
        cluster.lastRepairAttempt = clock.milliseconds
        let times = cluster.halts?.sequence == cluster.appliedSequence ? cluster.halts!.times + 1 : 1
        cluster.halts = (cluster.appliedSequence, times)
        if escalates, times > ClusterReplicator.haltsBeforeSnapshot, cluster.installedSnapshot != cluster.appliedSequence {
            cluster.halts = nil
            cluster.health = .applying
            diverge(cluster, .diverged("\(reason), \(times) times in a row at sequence \(cluster.appliedSequence): no copy of the stream continues what this node applied"))
            return
        }
        guard cluster.health == .applying else { return }
        cluster.health = .halted(reason)
        metrics.clusterIntegrityFailed()
        logger.critical("cluster: \(reason); this node stops applying the stream and taking writes, and consumes it again from sequence \(cluster.appliedSequence) until it continues what it applied")
        refuseWaiting(cluster)
    }

    /// What this node applied may differ from the majority's, or it cannot go on: it stops applying and
    /// taking writes, and installs the newest snapshot the majority agrees with (`snapshotFetched`).
    func diverge(_ cluster: ClusterReplicator, _ health: ClusterHealth) {
        guard !cluster.health.needsSnapshot else { return }
        // A node that installed a snapshot and is at once behind again finds entries missing that no snapshot
        // covers (messages on other subjects in the stream, a trim by hand): another snapshot would not help.
        if case let .behind(reason) = health, cluster.installedSnapshot == cluster.appliedSequence {
            halt(cluster, "\(reason), right after installing the snapshot of that sequence: no snapshot covers them", escalates: false)
            return
        }
        cluster.health = health
        cluster.lastRepairAttempt = clock.milliseconds
        metrics.clusterIntegrityFailed()
        logger.critical("cluster: \(health.reason ?? ""); this node stops applying the stream and taking writes, and installs the newest snapshot the other nodes agree with")
        refuseWaiting(cluster)
        answerUnavailable(cluster.abandonAwaiting())
        clusterNode?.bridge.fetchSnapshot()
    }

    /// Reads waiting for a revision are answered `unavailable` (the node may not reach it soon).
    private func refuseWaiting(_ cluster: ClusterReplicator) {
        expireRevisionWaits(cluster, now: UInt64.max)
    }

    /// Subscribes again from one entry before the next (the check of `checkContinuity`).
    func resubscribe(_ cluster: ClusterReplicator) {
        cluster.subscriptionGeneration += 1
        cluster.awaitingContinuity = true
        cluster.lastRepairAttempt = clock.milliseconds
        clusterNode?.bridge.resubscribe(from: cluster.appliedSequence, generation: cluster.subscriptionGeneration)
    }

    /// Housekeeping: a halted node subscribes again every second; one waiting for a snapshot asks again
    /// every 5 s (none could be read, or none the majority agrees with).
    func retryIntegrityRepair(_ cluster: ClusterReplicator, now: UInt64) {
        switch cluster.health {
        case .applying:
            return
        case .halted:
            if now &- cluster.lastRepairAttempt >= 1000 { resubscribe(cluster) }
        case .diverged, .behind:
            if now &- cluster.lastRepairAttempt >= 5000, !cluster.snapshotRequested {
                cluster.lastRepairAttempt = now
                cluster.snapshotRequested = true
                clusterNode?.bridge.fetchSnapshot()
            }
        }
    }

    /// The bridge read the newest snapshot for a node that needs one: installed when the claims this node
    /// heard for its sequence do not contradict its running hash (a snapshot of a diverged node, this one
    /// included, is not installed); otherwise asked for again later.
    func snapshotFetched(_ cluster: ClusterReplicator, _ snapshot: ClusterSnapshot?, problem: String?) {
        cluster.snapshotRequested = false
        guard cluster.health.needsSnapshot else { return }
        guard let snapshot else {
            logger.warning("cluster: no snapshot to install yet (\(problem ?? "none")); asking again in 5 s")
            return
        }
        if let majority = cluster.integrity.majorityHash(at: snapshot.sequence), let stated = snapshot.integrity,
           stated.knowsChain, StreamIntegrity.hex(stated.chain) != majority {
            logger.warning("cluster: the newest snapshot (sequence \(snapshot.sequence)) has a running hash the majority did not claim; waiting for a newer one")
            return
        }
        installSnapshotInPlace(cluster, snapshot)
    }

    /// Replaces this node's state by `snapshot`'s while it serves: the store (one transaction), the engine,
    /// the users, what it knows of the stream; every client connection is closed (their observations were
    /// on the state replaced: clients reconnect and observe again). Then it consumes the stream from the
    /// snapshot's sequence.
    func installSnapshotInPlace(_ cluster: ClusterReplicator, _ snapshot: ClusterSnapshot) {
        let state = snapshot.persistedState
        let engine = makeEngine(restoring: state)
        if let problem = engine.restoreProblems.first {
            logger.error("cluster: the snapshot of sequence \(snapshot.sequence) could not be installed whole (\(problem)); waiting for another")
            return
        }
        let integrity = snapshot.integrity ?? .unknown(applied: snapshot.sequence)
        do throws(StorageError) {
            try store.replaceAll(with: state, streamSequence: snapshot.sequence,
                                 streamIntegrity: StreamIntegrity(integrity).encodedState, users: snapshot.users,
                                 sessions: snapshot.sessions)
        } catch {
            logger.critical("cluster: cannot store the snapshot of sequence \(snapshot.sequence): \(PrintableText.escaped("\(error)", limit: 1000)); stopping")
            exit(74)  // EX_IOERR
        }
        let closed = closeClientConnections(reason: .clusterStateReplaced)
        handler.engine = engine
        // The replicated sessions are the snapshot's (every connection of this node was closed: none is held here).
        sessions = SessionTable(recordsChanges: storage.keepsWrites)
        sessions.restore(snapshot.presenceSessions, now: clock.milliseconds)
        watchEphemeralObjects()
        if let replicated = snapshot.users {
            users.replaceAll(with: replicated)
            compiledPolicies.forgetAll()
        }
        uncommittedUsers.removeAll()
        cluster.appliedSequence = snapshot.sequence
        cluster.committedSequence = snapshot.sequence
        cluster.installedSnapshot = snapshot.sequence
        cluster.integrity.reset(to: integrity)
        cluster.health = .applying
        resubscribe(cluster)
        metrics.clusterRebootstrapped()
        logger.notice("cluster: installed the snapshot of stream sequence \(snapshot.sequence) (revision \(snapshot.revision), \(snapshot.objects.count) objects) in place; \(closed) connection\(closed == 1 ? "" : "s") closed; applying the stream from \(snapshot.sequence + 1)")
    }
}
