import CLibUV
import KVOEngine
import KVOJSON
import KVOModel
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// Cluster glue: the data directory check, bootstrapping, submitting writes to the stream, applying stream entries, revision waits.
/// Loop thread only, like the rest of `Server`.
extension Server {
    /// Why a data directory must not be used as it is asked to (nil: it may): a cluster node's directory holds
    /// the state of one stream and is never started alone or in another stream's cluster (it would diverge from
    /// the other nodes without anyone noticing), and a cluster node starts on data of its own stream or on an
    /// empty directory (revision 0, no classes), never on a single node's data.
    static func clusterDirectoryProblem(recorded: String?, cluster: ClusterConfiguration?, revision: UInt64,
                                        classes: Int) -> String? {
        switch (recorded, cluster) {
        case (nil, nil):
            return nil
        case let (recorded?, nil):
            return "the data directory belongs to cluster stream '\(recorded)': start it with --cluster and --cluster-stream \(recorded), or use another directory"
        case let (recorded?, cluster?) where recorded != cluster.stream:
            return "the data directory belongs to cluster stream '\(recorded)', not '\(cluster.stream)': use an empty directory for a node of another stream"
        case (_?, _?):
            return nil
        case (nil, _?) where revision > 0 || classes > 0:
            return "the data directory holds data written outside cluster mode (revision \(revision)): a cluster node starts on an empty directory and gets its state from the stream"
        case (nil, _?):
            return nil
        }
    }

    /// Start-up (before the loop serves): `SnapshotBootstrap.run`, logging what it did and the snapshot it
    /// chose.
    static func bootstrap(_ cluster: ClusterConfiguration, applied: UInt64, logger: Logger) -> SnapshotBootstrap.Outcome {
        let outcome = SnapshotBootstrap.run(cluster, applied: applied) { text, isError in
            if isError { logger.warning("\(text)") } else { logger.info("\(text)") }
        }
        if case let .install(snapshot) = outcome {
            logger.info("cluster: bootstrapping from the snapshot of stream sequence \(snapshot.sequence) (revision \(snapshot.revision), \(snapshot.objects.count) objects, \(snapshot.classes.count) classes, \(snapshot.bindings.count) bindings); the stream is consumed from \(snapshot.sequence + 1)")
        }
        return outcome
    }

    /// Cluster mode: a write is not applied here and now but queued for the stream (the next check phase
    /// appends this iteration's writes as one batch). The connection goes on reading: more writes join the
    /// queue (answered in request order, as one node's batches apply in stream order), anything else is held
    /// until they are answered (`ClusterNode.pipelinedWrites`), and at `--max-pending-requests` writes in flight it
    /// reads nothing more until one is answered. `bind`, `combineLatest` and
    /// `unbind` go the same way: every node creates the binding with the same id, and its `binding`
    /// events reach the creator's connection on this node only (`applyClusterEntry`). Loop thread.
    func submitToCluster(_ cluster: ClusterReplicator, _ request: Request, line: UnsafeBufferPointer<UInt8>,
                                 id: JSONValue?, connection: Connection, presence: JSONValue? = nil) {
        let operation = MetricsOperation(request)
        if let refusal = cluster.refusal {
            send(.failure(KVOError(.unavailable, refusal)), id: id, to: connection, counting: operation)
            return
        }
        let deadline = clock.milliseconds &+ UInt64(cluster.configuration.writeTimeout * 1000)
        cluster.submit(line: Array(line), user: connection.principal?.user, presence: presence,
                       writer: ClusterReplicator.Writer(connection: connection.id, requestID: id, operation: operation,
                                                        deadline: deadline, started: requestStarted))
        if let clusterNode, clusterNode.pipelinedWrites.submitted(connection.id) >= configuration.maximumPendingRequests {
            connection.pauseReading(.replication)
        }
    }

    /// Answers a cluster write (applied, refused or `unavailable`) if its connection is still open. Returns
    /// the connection when this was its last write in flight and a request is held behind it: the caller
    /// hands it to `releaseHeldRequest` once it may handle a request (not in the middle of an entry).
    func answerClusterWrite(_ writer: ClusterReplicator.Writer,
                                    _ reply: Result<ReplyFields, KVOError>) -> Connection? {
        guard let clusterNode else { return nil }
        let remaining = clusterNode.pipelinedWrites.answered(writer.connection)
        guard let connection = connection(writer.connection)?.takeUnretainedValue() else {
            if remaining == 0 { _ = clusterNode.pipelinedWrites.takeHeld(writer.connection) }
            return nil
        }
        send(reply, id: writer.requestID, to: connection, counting: writer.operation, startedAt: writer.started)
        if clusterNode.pipelinedWrites.isHolding(writer.connection) { return remaining == 0 ? connection : nil }
        if remaining < configuration.maximumPendingRequests { connection.resumeReading(.replication) }
        return nil
    }

    /// Handles the request `connection` held behind its writes, now all answered, and lets it read again.
    func releaseHeldRequest(_ connection: Connection) {
        guard let held = clusterNode?.pipelinedWrites.takeHeld(connection.id) else { return }
        if !connection.isClosing {
            switch held {
            case let .line(line): line.withUnsafeBufferPointer { handleLine($0, from: connection) }
            case .oversizedLine: answerOversizedLine(connection)
            }
        }
        connection.resumeReading(.replication)
    }

    /// Check phase: hands the writes queued this iteration to the bridge as one batch (unless a batch is
    /// still being appended: they then go with the next one).
    /// The job's deadline is real time (`uv_hrtime`), not `clock`: the NATS bridge's thread compares it with the
    /// real clock while it appends; the writes' own deadlines, on `clock`, are the loop's (`expireClusterWrites`).
    func publishClusterBatch(_ cluster: ClusterReplicator) {
        let deadline = uv_hrtime() &+ UInt64(cluster.configuration.writeTimeout * 1e9)
        if let job = cluster.takeBatch(deadline: deadline, time: clock.wallMilliseconds, now: clock.milliseconds) {
            clusterNode?.bridge.enqueue(job)
        }
    }

    /// The bridge posted: apply stream entries in order, note appended batches, answer writes whose batch
    /// could not be appended, install a snapshot read for a re-bootstrap. Loop thread (the cluster async handle).
    func drainClusterInbox() {
        guard let clusterNode else { return }
        let cluster = clusterNode.replicator
        for message in clusterNode.inbox.takeAll() {
            switch message {
            case let .entry(sequence, data, generation):
                applyClusterEntry(cluster, sequence: sequence, data: data, generation: generation)
                slowLog.activity.clusterEntries += 1
                releaseRevisionWaits()
            case let .consumerChanged(generation, sequence):
                guard generation == cluster.subscriptionGeneration, cluster.health == .applying else { continue }
                logger.info("cluster: the stream's consumer was re-created (from sequence \(sequence)); consuming again from \(cluster.appliedSequence) to check that the copy now serving this node continues what it applied")
                resubscribe(cluster)
            case let .published(batch, sequence, attempts):
                cluster.appended(batch)
                // A batch sent more than once may have been appended twice (a retry past the duplicate window);
                // a sequence of 0 is a duplicate acknowledged before the first copy was replicated.
                if attempts == 1, sequence > 0, !batch.hasPrefix("check."),
                   let mismatch = cluster.integrity.acknowledged(batch, at: sequence) {
                    diverge(cluster, .diverged(mismatch))
                }
            case let .publishFailed(batch, reason, attempted):
                logger.error("cluster: could not append a batch in \(cluster.configuration.writeTimeout) s: \(reason)")
                answerUnavailable(cluster.appendFailed(batch, attempted: attempted))
            case let .snapshotFetched(snapshot, problem):
                snapshotFetched(cluster, snapshot, problem: problem)
            case let .signal(data):
                receiveClusterSignal(data)
            case let .log(text, isError):
                if isError { logger.warning("\(text)") } else { logger.info("\(text)") }
            }
        }
    }

    /// Applies stream entry `sequence` through the engine, as every node does: each operation with its
    /// writer's rights, its events delivered to this node's observers, and its reply sent when the writer
    /// is connected here. What does not continue what this node applied is not applied (`StreamIntegrity`,
    /// docs/design.md, "Integrity of the stream"): the first delivery of a subscription must be the batch
    /// applied at the applied sequence, the next sequence must follow it, a batch applied before is skipped,
    /// one whose publisher's earlier batches are missing makes the node re-bootstrap, as does an entry at a
    /// sequence past the next (trimmed); an entry that does not decode, or is of an unknown engine
    /// version, halts it.
    func applyClusterEntry(_ cluster: ClusterReplicator, sequence: UInt64, data: [UInt8], generation: UInt64) {
        // Deliveries of a replaced subscription are stale; a halted node takes only its new subscription's
        // first delivery (the continuity check), one waiting for a snapshot takes none.
        guard generation == cluster.subscriptionGeneration, !cluster.health.needsSnapshot,
              cluster.health == .applying || cluster.awaitingContinuity else { return }
        // A node whose store cannot write applies nothing it could not commit; it subscribes again from
        // what it committed once the store writes (`checkStorage`).
        guard storage.refusal == nil else {
            cluster.awaitingStorage = true
            return
        }
        let applied = cluster.appliedSequence
        if cluster.awaitingContinuity {
            cluster.awaitingContinuity = false
            if sequence == applied, applied > 0 {
                checkContinuity(cluster, at: sequence, data: data)
                return
            }
            if sequence > applied + 1 {
                diverge(cluster, .behind("the stream's first entry for this node is \(sequence), after \(applied) applied: entries \(applied + 1)...\(sequence - 1) are gone (trimmed)"))
                return
            }
            resumeIfHalted(cluster)
        }
        guard case .applying = cluster.health else { return }
        guard sequence > applied else {
            // One subscription delivers increasing sequences: one at or below what it delivered is a copy
            // numbered differently (or an entry delivered twice under two numbers).
            halt(cluster, "stream entry \(sequence) was delivered after \(applied) by the same subscription: the copy of the stream serving this node is numbered differently")
            return
        }
        guard sequence == applied + 1 else {
            diverge(cluster, .behind("stream entry \(sequence) arrived after \(applied): entries \(applied + 1)...\(sequence - 1) are missing"))
            return
        }
        let entry: ReplicationEntry
        do throws(ReplicationEntryError) {
            entry = try ReplicationEntry.decode(data)
        } catch {
            halt(cluster, "stream entry \(sequence): \(error)", escalates: false)
            return
        }
        guard KVOEngine.oldestReplicationVersion...KVOEngine.replicationVersion ~= entry.version else {
            halt(cluster, "stream entry \(sequence) is of engine version \(entry.version); this kvod knows versions \(KVOEngine.oldestReplicationVersion)...\(KVOEngine.replicationVersion) only: upgrade it", escalates: false)
            return
        }
        if let checkpoint = entry.checkpoint {
            cluster.integrity.passed(batch: entry.batch)
            cluster.appliedSequence = sequence
            if let minority = cluster.integrity.claim(checkpoint, from: entry.node, node: cluster.configuration.node) {
                diverge(cluster, .diverged(minority))
                return
            }
            afterEntry(cluster, sequence)
            return
        }
        switch cluster.integrity.admit(entry, at: sequence) {
        case .apply:
            break
        case let .duplicate(firstAt):
            metrics.clusterDuplicateSkipped()
            logger.warning("cluster: stream entry \(sequence) is batch \(entry.batch) again (its publisher's batch applied at \(firstAt) or before): skipped")
            cluster.integrity.passed(batch: entry.batch)
            cluster.appliedSequence = sequence
            afterEntry(cluster, sequence)
            return
        case let .gap(reason):
            // Consumed again (perhaps from another copy) up to `gapRefetches` times; a gap every copy delivers
            // is the stream's own: every node applies past it alike (the lost batches are lost everywhere), so
            // it is logged and applied past. A copy that was alone in missing them shows in the checkpoints.
            let times = cluster.gap?.sequence == sequence ? cluster.gap!.times + 1 : 1
            cluster.gap = (sequence, times)
            guard times > ClusterReplicator.gapRefetches else {
                halt(cluster, "stream entry \(sequence): \(reason)")
                return
            }
            metrics.clusterIntegrityFailed()
            logger.critical("cluster: stream entry \(sequence): \(reason); every one of \(times) subscriptions delivered it so: the stream lost those batches (acknowledged writes among them are lost on every node); applying past the gap")
        }
        if entry.node == cluster.configuration.node, let mismatch = cluster.integrity.deliveredOwnBatch(entry.batch, at: sequence) {
            diverge(cluster, .diverged(mismatch))
            return
        }
        let writers = entry.node == cluster.configuration.node ? cluster.writers(ofApplied: entry.batch) : nil
        // Every node applies the entry's writes at the time its publisher stamped, or the previous entry's when
        // that is later (an older kvod's entry has none: its writes set no ttl, and this node's clock is as good as any).
        let time = cluster.integrity.applyTime(of: entry, fallback: clock.wallMilliseconds)
        var released: [Connection] = []
        for (index, operation) in entry.operations.enumerated() {
            let writer = writers.flatMap { index < $0.count ? $0[index] : nil }
            if let change = operation.userChange {
                let reply = applyReplicated(change, by: operation.user, tokenText: writer?.tokenText)
                guard let writer else { continue }
                if let connection = answerClusterWrite(writer, reply) { released.append(connection) }
                continue
            }
            let reply: Result<ReplyFields, KVOError>
            // A presence operation (`Server+ReplicatedPresence`); an ephemeral create's context names its session.
            let decoded = RequestDecoder.decode(operation.line).request
            if let context = operation.presence, context["k"] != nil || Server.isPresenceRequest(decoded) {
                let presenceReply = applyPresence(operation, context: context, decoded: decoded,
                                                  publisher: entry.publisher.map(String.init) ?? entry.node,
                                                  sequence: sequence, time: time, cluster: cluster, writer: writer)
                guard let writer, let presenceReply else { continue }
                if let connection = answerClusterWrite(writer, presenceReply) { released.append(connection) }
                continue
            }
            switch decoded {
            case let .success(request) where request.isWrite:
                // The writer's connection bounds what its reply may carry (a conflict's current value).
                let budget = writer.flatMap { writer in
                    connection(writer.connection).map {
                        ReplyBudget(outputLimit: configuration.maximumOutputBufferBytes, queued: $0.takeUnretainedValue().outputBytes,
                                    id: writer.requestID)
                    }
                } ?? .unlimited
                // This node's ephemeral create joins its session now, before any later entry can delete it.
                reply = applyWrite(request, from: writer?.connection ?? Server.clusterConnection,
                                   access: clusterAccess(forUser: operation.user), budget: budget, time: time)
                // An ephemeral create joins its session on every node now, before any later entry can delete it.
                if let session = operation.presence?["id"]?.stringValue, case .success = reply, request.isEphemeralWrite,
                   let object = request.writtenObject {
                    registerReplicatedEphemeral(object, session: session, time: time)
                }
            case .success:
                reply = .failure(KVOError(.badRequest, "not a write"))
            case let .failure(error):
                reply = .failure(error)
            }
            guard let writer else { continue }
            if let connection = answerClusterWrite(writer, reply) { released.append(connection) }
        }
        cluster.integrity.applied(entry, data: data, at: sequence, time: entry.time == nil ? nil : time)
        cluster.halts = nil
        cluster.appliedSequence = sequence
        afterEntry(cluster, sequence)
        for connection in released { releaseHeldRequest(connection) }
    }

    /// After the entry at `sequence` (applied, skipped or a checkpoint): this node's checkpoint and
    /// snapshot when `sequence` is one of theirs.
    private func afterEntry(_ cluster: ClusterReplicator, _ sequence: UInt64) {
        let configuration = cluster.configuration
        if configuration.isCheckpoint(sequence), cluster.integrity.state.knowsChain {
            if let minority = cluster.integrity.recordCheckpoint(at: sequence, node: configuration.node) {
                diverge(cluster, .diverged(minority))
                return
            }
            // Real time: the bridge's thread compares the deadline with `uv_hrtime` (`publishClusterBatch`).
            clusterNode?.bridge.enqueue(cluster.checkpointJob(after: sequence, revision: handler.engine.revision,
                                                              deadline: uv_hrtime() &+ UInt64(configuration.writeTimeout * 1e9)))
        }
        if let snapshotPublisher = clusterNode?.snapshotPublisher, configuration.snapshotEvery > 0,
           sequence % configuration.snapshotEvery == 0 {
            snapshotPublisher.enqueue(ClusterSnapshot(engine: handler.engine, users: users, sequence: sequence,
                                                      integrity: cluster.integrity.state,
                                                      sessions: sessions.sessions.mapValues(\.record)))
        }
    }

    /// A read or observe whose `atLeastRev` is beyond this node's revision. In cluster mode it waits until
    /// this node applies that revision (the connection reads nothing more meanwhile, so replies stay in
    /// request order) or `--cluster-write-timeout` passes (`unavailable`). In single mode no other node
    /// will bring that revision, and every revision this server gave is at or below its own: the request
    /// is refused at once (`bad_request`). Loop thread.
    func holdForRevision(_ revision: UInt64, _ request: Request, decoded: RequestDecoder.Decoded,
                                 connection: Connection) {
        guard let clusterNode else {
            let message = "'atLeastRev' \(revision) is beyond this server's revision \(handler.engine.revision) (a revision from another server, or from before an in-memory server restarted?)"
            send(.failure(KVOError(.badRequest, message)), id: decoded.id, to: connection, counting: MetricsOperation(request))
            return
        }
        let cluster = clusterNode.replicator
        if let refusal = cluster.refusal {
            send(.failure(KVOError(.unavailable, refusal)), id: decoded.id, to: connection, counting: MetricsOperation(request))
            return
        }
        let deadline = clock.milliseconds &+ UInt64(cluster.configuration.writeTimeout * 1000)
        clusterNode.revisionWaits.add(RevisionWaits.Waiting(revision: revision, connection: connection.id,
                                                            requestID: decoded.id, request: request, deadline: deadline,
                                                            started: requestStarted))
        connection.pauseReading(.revision)
    }

    /// After an entry was applied: carries out the held requests whose revision this node has reached,
    /// and lets their connections read again.
    func releaseRevisionWaits() {
        guard let clusterNode, !clusterNode.revisionWaits.isEmpty else { return }
        for item in clusterNode.revisionWaits.takeReady(revision: handler.engine.revision) {
            guard let connection = connection(item.connection)?.takeUnretainedValue(), !connection.isClosing else { continue }
            continuingRequest(startedAt: item.started) {
                perform(item.request, id: item.requestID, connection: connection)
            }
            connection.resumeReading(.revision)
        }
    }

    /// Held requests past `--cluster-write-timeout`: answered `unavailable`, their connections read again.
    func expireRevisionWaits(_ cluster: ClusterReplicator, now: UInt64) {
        guard let clusterNode, !clusterNode.revisionWaits.isEmpty else { return }
        for item in clusterNode.revisionWaits.takeExpired(now: now) {
            guard let connection = connection(item.connection)?.takeUnretainedValue(), !connection.isClosing else { continue }
            let message = cluster.refusal ?? "this node had not applied revision \(item.revision) within \(cluster.configuration.writeTimeout) s (it is at \(handler.engine.revision): behind, or cut off from the stream)"
            send(.failure(KVOError(.unavailable, message)), id: item.requestID, to: connection,
                 counting: MetricsOperation(item.request), startedAt: item.started)
            connection.resumeReading(.revision)
        }
    }

    /// A user change from the stream: applied when its sender is, at this point of the stream, a user
    /// with admin on every object (checked again here, as every node does, since the sender's rights may
    /// have changed since the node that took it checked them).
    func applyReplicated(_ change: UserChange, by sender: String?, tokenText: String?) -> Result<ReplyFields, KVOError> {
        guard let sender else {
            return .failure(KVOError(.forbidden, "user management needs a user with 'admin' on every object ('*')"))
        }
        do throws(KVOError) {
            try change.operation.declaration.admit(clusterAccess(forUser: sender))
        } catch {
            return .failure(error)
        }
        return apply(change, tokenText: tokenText)
    }

    /// Who an operation from the stream acts as: its writer's user with this node's rules for the user
    /// (the users must be the same on every node), or open mode's rights for a write made in open mode.
    func clusterAccess(forUser user: String?) -> ConnectionAccess {
        // The server's own writes (`expire`): unrestricted, as a single node applies them.
        if user == Server.serverUser { return ConnectionAccess.open() }
        guard let user else { return users.isEmpty ? ConnectionAccess.open() : ConnectionAccess(ConnectionAccess.nobody) }
        guard let policy = policy(ofUser: user) else { return ConnectionAccess(ConnectionAccess.nobody) }
        return ConnectionAccess(Principal(user: user, policy: policy))
    }

    /// Writes past `--cluster-write-timeout`: answered `unavailable`, their connections read again.
    func expireClusterWrites(_ cluster: ClusterReplicator, now: UInt64) {
        let expired = cluster.expire(now: now)
        guard !expired.isEmpty else { return }
        logger.warning("cluster: \(expired.count) write\(expired.count == 1 ? "" : "s") not applied within \(cluster.configuration.writeTimeout) s; answered unavailable")
        answerUnavailable(expired)
    }

    func answerUnavailable(_ expired: [ClusterReplicator.Expired]) {
        guard let cluster else { return }
        var released: [Connection] = []
        for item in expired {
            let seconds = cluster.configuration.writeTimeout
            let message = item.definitive
                ? "the cluster's stream could not be reached within \(seconds) s (NATS unavailable); the write was not made"
                : "the write was not confirmed within \(seconds) s (NATS unavailable or slow); it may still be applied: read before retrying"
            if let connection = answerClusterWrite(item.writer, .failure(KVOError(.unavailable, message))) {
                released.append(connection)
            }
        }
        for connection in released { releaseHeldRequest(connection) }
    }

    /// The connection id stream operations from other nodes run as (their writer is elsewhere).
    static let clusterConnection = ConnectionID(0, slot: UInt32.max)
}
