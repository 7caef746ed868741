import CLibUV
import KVOEngine
import KVOJSON
import KVOModel
import Logging

/// Presence (docs/protocol.md, "Presence"): sessions, the `onDisconnect` writes they run when they end, and
/// their ephemeral objects. The table is `sessions` (`SessionTable`); this is what the server does with it.
///
/// *Lifetime.* `session` attaches one to the connection; when the connection closes for any reason the session
/// is detached and ends once its grace is over, unless a connection resumes it first (the client libraries
/// do on reconnection). `endSession` ends it at once. A restart reads the stored sessions back detached, so
/// those whose clients do not come back within their grace end then.
///
/// *Ending.* Each action is a request line run through the same door as a client's write, with its
/// registrant's rights as they are then (`clusterAccess(forUser:)`), in registration order, then each
/// ephemeral object still the session's is deleted. A single node applies them at once. In cluster mode the
/// table is replicated state and all of this is decided at stream positions (`Server+ReplicatedPresence`). A
/// session's record leaves the store with the group commit of its actions' writes.
///
/// *Ephemeral objects.* A `create` with `ephemeral: true` joins the creator's session once it succeeds (in
/// cluster mode when this node applies it); the engine reports every removal of such an object by any path
/// (`KVOEngine.removalWatch`), so that a session never deletes an object someone deleted and created again.
///
/// Loop thread only, like the rest of `Server`.
extension Server {
    /// Answers `session`, `onDisconnect`, `cancelOnDisconnect` and `endSession` (the `.presence` route).
    func presence(_ request: Request, id: JSONValue?, connection: Connection) {
        let operation = MetricsOperation(request)
        let reply: Result<ReplyFields, KVOError>
        do throws(KVOError) {
            reply = .success(try presenceReply(request, connection: connection))
        } catch {
            reply = .failure(error)
        }
        send(reply, id: id, to: connection, counting: operation)
    }

    private func presenceReply(_ request: Request, connection: Connection) throws(KVOError) -> ReplyFields {
        switch request {
        case let .session(resume, grace):
            let user = connection.principal?.user
            guard let resume else {
                let session = try sessions.begin(user: user, grace: grace ?? SessionLimits.defaultGraceSeconds * 1000,
                                                 connection: connection.id)
                return ReplyFields([("grace", Server.seconds(session.grace)), ("resumed", .bool(false)),
                                    ("session", .string(session.id))])
            }
            let (session, takenFrom) = try sessions.resume(resume, user: user, connection: connection.id, grace: grace)
            if let takenFrom {
                logger.debug("session taken over by another connection", metadata: [
                    "session": "\(session.id.prefix(8))", "from": "\(takenFrom)", "to": "\(connection.id)",
                ])
            }
            return ReplyFields([("actions", .int(Int64(session.actions.count))),
                                ("ephemeral", .int(Int64(session.ephemeralObjects.count))),
                                ("grace", Server.seconds(session.grace)), ("resumed", .bool(true)),
                                ("session", .string(session.id))])
        case let .onDisconnect(line, _):
            let number = try sessions.addAction(line, connection: connection.id, user: connection.principal?.user)
            return ReplyFields([("action", .int(Int64(number)))])
        case let .cancelOnDisconnect(number):
            let cancelled = try sessions.cancelActions(number, connection: connection.id, user: connection.principal?.user)
            return ReplyFields([("cancelled", .int(Int64(cancelled)))])
        case .endSession:
            guard let id = sessions.sessionID(of: connection.id) else { throw KVOError(.badRequest, "this connection has no session") }
            // Its writes could not reach the stream now: the session stays, to be ended again (or when the client goes).
            if let refusal = cluster?.refusal { throw KVOError(.unavailable, refusal) }
            if let cluster, cluster.appendsStalled(now: clock.milliseconds) {
                throw KVOError(.unavailable, "the cluster's stream has taken none of this node's writes for \(ClusterReplicator.stallMilliseconds / 1000) s or more (NATS unreachable, an election, or no quorum); the session stays: end it again later, or use another node")
            }
            guard let session = sessions.end(id) else { throw KVOError(.badRequest, "this connection has no session") }
            let ran = runEndingActions(of: session)
            return ReplyFields([("ran", .int(Int64(ran)))])
        default:
            preconditionFailure("\(request.operation.name) is not routed to presence")
        }
    }

    /// `ms` as seconds in a reply: an integer when whole.
    static func seconds(_ ms: Int64) -> JSONValue {
        ms % 1000 == 0 ? .int(ms / 1000) : .double(Double(ms) / 1000)
    }

    /// A create with `ephemeral` from `connection`: the id of its session (refused without one, or with no
    /// room for another ephemeral object).
    func ephemeralSession(for connection: Connection) throws(KVOError) -> String {
        try sessions.admitEphemeral(from: connection.id, user: connection.principal?.user)
    }

    /// An ephemeral create succeeded (single node; a cluster's: `registerReplicatedEphemeral`): `object` belongs to
    /// session `id` from now on, and the engine reports its removal.
    func registerEphemeral(_ object: String, session id: String) {
        if sessions.addEphemeral(object, to: id) { handler.engine.removalWatch.insert(object) }
    }

    /// After the engine handled requests: the ephemeral objects removed meanwhile leave their sessions, also
    /// when the same request created them again (a batch's delete and create: the new object is nobody's). A
    /// failed batch's removals are not reported (`KVOEngine.abortBatch` forgets them).
    func noteRemovedEphemeralObjects() {
        let engine = handler.engine
        for object in engine.takeRemovedWatchedObjects() {
            sessions.objectRemoved(object)
            engine.removalWatch.remove(object)
        }
    }

    /// `connection` closed: its session, if it has one, ends after its grace unless resumed.
    func detachSession(of connection: ConnectionID) {
        guard !sessions.isEmpty else { return }
        if let cluster {
            detachReplicatedSession(of: connection, cluster: cluster)
            return
        }
        sessions.detach(connection, now: clock.milliseconds)
    }

    /// Housekeeping: ends the detached sessions whose grace is over (not while writes are refused, nor while the
    /// stream takes none of this node's appends: they end once writes are taken again).
    func endDueSessions() {
        guard sessions.hasDetached, takesServerWrites, cluster?.appendsStalled(now: clock.milliseconds) != true else { return }
        let due = sessions.due(now: clock.milliseconds)
        guard !due.isEmpty else { return }
        defer { flushConnections() }
        var writes = 0
        for id in due {
            // Bounded per tick, as expiries are: sessions that all end at once (a restart after many clients went)
            // end over several short steps, not in one stall of the loop. The rest are due again next tick.
            if writes >= Server.maximumSessionWritesPerTick { break }
            guard let session = sessions.end(id) else { continue }
            writes += runEndingActions(of: session)
        }
    }

    /// Most writes that ending sessions run per housekeeping tick (a session's are never split): 20,000 a second.
    static let maximumSessionWritesPerTick = 2_000

    /// Runs an ended session's actions (`serverWrite`, as the registrant, with its rights then), then deletes its
    /// ephemeral objects (as the server: their lifetime was declared when they were created, by a user who could
    /// create them then); returns how many writes ran (or were submitted). A refusal is logged, not retried. In
    /// cluster mode the writes are retained (`ClusterReplicator.Writer.retained`): however long the stream takes
    /// no appends, they wait for it and are appended once, never dropped while this node lives.
    @discardableResult
    func runEndingActions(of session: PresenceSession) -> Int {
        let user = session.user
        for action in session.actions {
            guard case let .failure(error)? = serverWrite(action.line, as: user, retained: true) else { continue }
            logger.notice("session ended: onDisconnect action \(action.id) refused: \(error.code.rawValue): \(PrintableText.escaped(error.message, limit: 300))",
                          metadata: ["session": "\(session.id.prefix(8))", "user": "\(user ?? "-")"])
        }
        for object in session.ephemeralObjects { releaseEphemeral(object) }
        return session.actions.count + session.ephemeralObjects.count
    }

    /// Deletes an ended session's ephemeral `object`, as the server (single node; a cluster deletes it inside the
    /// entry that ends the session: `endReplicatedSession`).
    func releaseEphemeral(_ object: String) {
        handler.engine.removalWatch.remove(object)
        if case let .failure(error)? = serverWrite(JSONWriter.bytes(.object(["op": .string("delete"), "object": .string(object)])),
                                                   as: Server.serverUser), error.code != .notFound {
            logger.notice("session ended: ephemeral object deletion refused: \(error.code.rawValue): \(PrintableText.escaped(error.message, limit: 300))")
        }
    }

    /// The sessions read back from the store at start-up (or after a roll-back): detached, each ending after
    /// its grace from now, their ephemeral objects watched (those that no longer exist dropped). An action an
    /// older kvod accepted with `null` for an absent member is read as it was meant (`LegacyNullMembers`).
    func restoreSessions(_ stored: [PresenceSession]) {
        var stored = stored
        var rewritten = 0
        for index in stored.indices {
            for (position, action) in stored[index].actions.enumerated() {
                guard case .failure = RequestDecoder.decode(action.line).request,
                      let line = LegacyNullMembers.removed(from: action.line) else { continue }
                stored[index].actions[position] = PresenceSession.Action(id: action.id, line: line)
                rewritten += 1
            }
        }
        if rewritten > 0 {
            logger.notice("\(rewritten) stored onDisconnect action\(rewritten == 1 ? "" : "s") from an older kvod read with their null members as absent, as they were accepted")
        }
        // A cluster node upgraded from a kvod before replicated sessions (engine version 5) may have stored sessions
        // of its own (no epoch): they are no other node's, so they end now as they would have then, their writes
        // submitted to the stream as the server's (`runEndingActions`), and leave the store.
        var ownBefore: [PresenceSession] = []
        if cluster != nil {
            ownBefore = stored.filter { $0.epoch == 0 }
            stored.removeAll { $0.epoch == 0 }
        }
        sessions = SessionTable(recordsChanges: storage.keepsWrites)
        sessions.restore(stored + ownBefore, now: clock.milliseconds)
        watchEphemeralObjects()
        if !stored.isEmpty {
            logger.info("restored \(stored.count) session\(stored.count == 1 ? "" : "s"), each ending after its grace unless its client resumes it")
        }
        for session in ownBefore {
            guard let ended = sessions.end(session.id) else { continue }
            runEndingActions(of: ended)
        }
        if !ownBefore.isEmpty {
            logger.notice("\(ownBefore.count) session\(ownBefore.count == 1 ? "" : "s") stored by a kvod before replicated sessions ended at start-up; their actions go to the stream")
        }
    }

    /// Cluster mode: stored sessions that an installed snapshot's replaced (`ids`) leave the store at the next group
    /// commit (those the snapshot has are written again).
    func replacedSessions(_ ids: [String]) {
        guard sessions.recordsChanges else { return }
        for id in ids { sessions.uncommitted.insert(id) }
        for id in sessions.sessions.keys { sessions.uncommitted.insert(id) }
    }

    /// Tells the engine (a new one: start-up, a snapshot installed, a roll-back) which objects are ephemeral,
    /// and drops from the sessions those that no longer exist.
    func watchEphemeralObjects() {
        let engine = handler.engine
        engine.removalWatch.removeAll()
        for object in sessions.watchedObjectIDs {
            if engine.changedRevision(of: object) == nil {
                sessions.objectRemoved(object)
            } else {
                engine.removalWatch.insert(object)
            }
        }
    }
}
