import KVOEngine
import KVOJSON
import KVOModel
import Logging

/// Presence in cluster mode (docs/design.md, "Presence"; docs/protocol.md, "Presence"): the session table is
/// replicated state. Every change to it is an operation of a stream entry with a `presence` context
/// (`ReplicationEntry.Operation.presence`), applied by every node at the same position:
///
/// - a client's `session` (begin: the id chosen by the node it reached; resume: a new *attachment*, whose epoch is
///   the entry's stream sequence, held by that node's incarnation), `onDisconnect`, `cancelOnDisconnect` and
///   `endSession` (checked against the attachment the client holds: a connection whose session was resumed
///   elsewhere since changes nothing);
/// - the node's own: `detach` (its connection closed: the session ends its grace after the entry's apply time),
///   `end` (a node whose clock passed the session's deadline) and `alive` (a node holding sessions that appended
///   nothing for a second).
///
/// *Whose clock.* A session's deadline is computed from the stream's apply times only (`StreamIntegrity.applyTime`),
/// in its *active time* (`StreamIntegrity.activeTime`: a gap between two entries counts 2 s at most, so an outage of
/// the whole stream ends nobody's session): held, the active time of its holder's last batch
/// (`StreamIntegrity.lastHeard`) plus `livenessWindow` plus its grace; detached, the active time of its detach plus
/// its grace. An `end` entry ends the session only if, at its position, the active time is past that deadline and the attachment it names is still the last (as `expire` checks
/// `changedRev`); its actions and ephemeral deletions then run inside that entry on every node, exactly once
/// whichever node wrote it and whichever node dies. A node holding a client's session appends at least once a
/// second, so no node can end it.
///
/// Loop thread only, like the rest of `Server`.
extension Server {
    /// How long (ms of stream apply time) a holder may append nothing before its sessions count as detached.
    static let presenceLivenessWindow: Int64 = 5_000
    /// How often (ms) a node appends when it appends nothing else while there are sessions (`alive`).
    static let presenceAliveEvery: UInt64 = 1_000
    /// How often (ms) the housekeeping tick looks at the replicated sessions.
    static let presenceTickEvery: UInt64 = 200

    /// `handleLine`'s presence route on a cluster node: checks what only this node knows (the session the
    /// connection holds), then submits the request to the stream with its context; it is answered when applied.
    func submitPresence(_ cluster: ClusterReplicator, _ request: Request, line: UnsafeBufferPointer<UInt8>,
                        id: JSONValue?, connection: Connection) {
        let context: JSONValue
        do throws(KVOError) {
            context = try presenceContext(cluster, request, connection: connection)
        } catch {
            send(.failure(error), id: id, to: connection, counting: MetricsOperation(request))
            return
        }
        submitToCluster(cluster, request, line: line, id: id, connection: connection, presence: context)
    }

    private func presenceContext(_ cluster: ClusterReplicator, _ request: Request,
                                 connection: Connection) throws(KVOError) -> JSONValue {
        if let refusal = cluster.refusal { throw KVOError(.unavailable, refusal) }
        let held = sessions.sessionID(of: connection.id).flatMap { sessions.session($0) }
        switch request {
        case let .session(resume, _):
            if let held, held.id != resume {
                throw KVOError(.badRequest, "this connection already has session \(held.id): end it ('endSession') or open another connection")
            }
            if let resume { return .object(["id": .string(resume)]) }
            var id = PresenceSession.newID()
            while sessions.session(id) != nil { id = PresenceSession.newID() }
            return .object(["id": .string(id)])
        default:
            guard let held else {
                throw KVOError(.badRequest, "this connection has no session: begin one with {\"op\":\"session\"}")
            }
            if case .endSession = request, cluster.appendsStalled(now: clock.milliseconds) {
                throw KVOError(.unavailable, "the cluster's stream has taken none of this node's writes for \(ClusterReplicator.stallMilliseconds / 1000) s or more (NATS unreachable, an election, or no quorum); the session stays: end it again later, or use another node")
            }
            return Server.attachment(held)
        }
    }

    /// Whether `decoded` is a request of the presence route (`session`, `onDisconnect`, …).
    static func isPresenceRequest(_ decoded: Result<Request, KVOError>) -> Bool {
        guard case let .success(request) = decoded else { return false }
        return request.operation.declaration.route == .presence
    }

    /// `{"id":…,"epoch":…}`: the attachment a connection holds.
    static func attachment(_ session: PresenceSession) -> JSONValue {
        .object(["id": .string(session.id), "epoch": .int(Int64(bitPattern: session.epoch))])
    }

    /// Applies a stream operation with a `presence` context at `sequence`, published by `publisher` (a node
    /// incarnation), at apply time `time`: every node alike. Returns the reply for its writer (nil: none).
    func applyPresence(_ operation: ReplicationEntry.Operation, context: JSONValue, decoded: Result<Request, KVOError>,
                       publisher: String,
                       sequence: UInt64, time: Int64, cluster: ClusterReplicator,
                       writer: ClusterReplicator.Writer?) -> Result<ReplyFields, KVOError>? {
        let id = context["id"]?.stringValue ?? ""
        let epoch = UInt64(bitPattern: context["epoch"]?.intValue ?? 0)
        switch context["k"]?.stringValue {
        case "alive"?:
            // The publisher's mark (the active time of its last batch) holds its sessions: `StreamIntegrity.applied`.
            return nil
        case "detach"?:
            sessions.detachReplicated(id, epoch: epoch, at: cluster.integrity.activeTime(at: time))
            return nil
        case "end"?:
            guard let session = sessions.session(id), session.epoch == epoch else { return nil }
            let deadline = session.replicatedDeadline(holderTime: session.holder.flatMap { cluster.integrity.lastHeard($0) },
                                                      window: Server.presenceLivenessWindow)
            guard cluster.integrity.activeTime(at: time) >= deadline else { return nil }
            endReplicatedSession(id, time: time)
            return nil
        case nil:
            break
        default:
            return .failure(KVOError(.badRequest, "unknown presence entry"))
        }
        let request: Request
        switch decoded {
        case let .success(value): request = value
        case let .failure(error): return .failure(error)
        }
        do throws(KVOError) {
            return .success(try applyClientPresence(request, id: id, epoch: epoch, user: operation.user,
                                                   publisher: publisher, sequence: sequence, time: time, writer: writer))
        } catch {
            return .failure(error)
        }
    }

    private func applyClientPresence(_ request: Request, id: String, epoch: UInt64, user: String?, publisher: String,
                                     sequence: UInt64, time: Int64,
                                     writer: ClusterReplicator.Writer?) throws(KVOError) -> ReplyFields {
        if case let .session(resume, grace) = request {
            let session: PresenceSession
            var fields: [(String, JSONValue)]
            if resume == nil {
                session = try sessions.beginReplicated(id, user: user, grace: grace ?? SessionLimits.defaultGraceSeconds * 1000,
                                                       holder: publisher, epoch: sequence)
                fields = [("grace", Server.seconds(session.grace)), ("resumed", .bool(false)), ("session", .string(id))]
            } else {
                let (attached, takenFrom) = try sessions.attachReplicated(id, user: user, grace: grace, holder: publisher,
                                                                          epoch: sequence)
                session = attached
                if let takenFrom {
                    logger.debug("session taken over by another connection", metadata: [
                        "session": "\(id.prefix(8))", "from": "\(takenFrom)", "holder": "\(publisher)",
                    ])
                }
                fields = [("actions", .int(Int64(session.actions.count))),
                          ("ephemeral", .int(Int64(session.ephemeralObjects.count))),
                          ("grace", Server.seconds(session.grace)), ("resumed", .bool(true)), ("session", .string(id))]
            }
            // This node's connection holds it from now on; one that closed meanwhile leaves it to the detach
            // `replicatedPresenceTick` appends for sessions held here by no connection.
            if let writer, let entry = connection(writer.connection), !entry.takeUnretainedValue().isClosing {
                sessions.bind(id, to: writer.connection)
            }
            return ReplyFields(fields)
        }
        guard let session = sessions.session(id), session.user == user else {
            throw KVOError(.badRequest, "this connection has no session: it ended (its actions ran)")
        }
        guard session.epoch == epoch else {
            throw KVOError(.badRequest, "this connection's session was resumed by another connection")
        }
        switch request {
        case let .onDisconnect(line, _):
            return ReplyFields([("action", .int(Int64(try sessions.addAction(line, toSession: id))))])
        case let .cancelOnDisconnect(number):
            return ReplyFields([("cancelled", .int(Int64(sessions.cancelActions(number, ofSession: id))))])
        case .endSession:
            return ReplyFields([("ran", .int(Int64(endReplicatedSession(id, time: time))))])
        default:
            throw KVOError(.badRequest, "\(request.operation.name) is not a presence request")
        }
    }

    /// Ends session `id` inside the entry being applied, on every node alike: its actions run in order as its
    /// user's writes (with the user's rights at this position) at `time`, then the ephemeral objects still its
    /// are deleted as the server (their lifetime was declared when they were made). Returns how many writes ran
    /// (`endSession`'s `ran`: the actions, then one deletion per ephemeral object).
    @discardableResult
    func endReplicatedSession(_ id: String, time: Int64) -> Int {
        guard let session = sessions.session(id) else { return 0 }
        // Run while the session is still in the table: an action that deletes one of its ephemeral objects
        // takes it out of the session (`noteRemovedEphemeralObjects`), so it is not deleted again below.
        for action in session.actions {
            applyServerWrite(action.line, as: session.user, time: time, what: "onDisconnect action \(action.id)", session: id)
        }
        guard let ended = sessions.end(id) else { return session.actions.count }
        for object in ended.ephemeralObjects {
            applyServerWrite(JSONWriter.bytes(.object(["op": .string("delete"), "object": .string(object)])),
                             as: Server.serverUser, time: time, what: "ephemeral object deletion", session: id)
            handler.engine.removalWatch.remove(object)
        }
        return session.actions.count + ended.ephemeralObjects.count
    }

    /// Applies the server's write `line` as `user` at `time`, inside the entry being applied; counted, a refusal logged.
    private func applyServerWrite(_ line: [UInt8], as user: String?, time: Int64, what: String, session: String) {
        let reply: Result<ReplyFields, KVOError>
        var operation = MetricsOperation.invalid
        switch RequestDecoder.decode(line).request {
        case let .success(request) where request.isWrite:
            operation = MetricsOperation(request)
            reply = applyWrite(request, from: Server.clusterConnection, access: clusterAccess(forUser: user), time: time)
        case .success:
            reply = .failure(KVOError(.badRequest, "not a write"))
        case let .failure(error):
            reply = .failure(error)
        }
        switch reply {
        case .success:
            metrics.countRequest(operation, error: nil)
        case let .failure(error):
            metrics.countRequest(operation, error: error.code)
            if error.code != .notFound || user != Server.serverUser {
                logger.notice("session ended: \(what) refused: \(error.code.rawValue): \(PrintableText.escaped(error.message, limit: 300))",
                              metadata: ["session": "\(session.prefix(8))", "user": "\(user ?? "-")"])
            }
        }
    }

    /// An ephemeral create applied from the stream (every node): `object` joins session `id`, or, when the session
    /// ended while the create travelled, is deleted at once in the same entry.
    func registerReplicatedEphemeral(_ object: String, session id: String, time: Int64) {
        if sessions.addEphemeral(object, to: id) {
            handler.engine.removalWatch.insert(object)
            return
        }
        applyServerWrite(JSONWriter.bytes(.object(["op": .string("delete"), "object": .string(object)])),
                         as: Server.serverUser, time: time, what: "ephemeral object of an ended session", session: id)
    }

    /// A connection of this node closed: the session it held is detached through the stream.
    func detachReplicatedSession(of connection: ConnectionID, cluster: ClusterReplicator) {
        guard let session = sessions.unbind(connection) else { return }
        submitPresenceEntry(cluster, ["k": .string("detach"), "id": .string(session.id),
                                      "epoch": .int(Int64(bitPattern: session.epoch))])
    }

    /// Housekeeping, cluster mode: appends the detach of each session held here by no connection, `alive` while
    /// there are sessions and this node appended nothing for `presenceAliveEvery`, and the `end` of each session
    /// whose deadline the stream's active time at this node's clock has passed. Not while the stream takes no appends (nothing would get through).
    func replicatedPresenceTick(_ cluster: ClusterReplicator) {
        guard let clusterNode, !sessions.isEmpty else { return }
        let now = clock.milliseconds
        guard now &- clusterNode.presenceTickAt >= Server.presenceTickEvery, takesServerWrites,
              !cluster.appendsStalled(now: now) else { return }
        clusterNode.presenceTickAt = now
        // A detach waits for the write deadline before it is sent again; an `end` refused at its position (sent a
        // little early) is sent again a second later.
        let retry = UInt64(cluster.configuration.writeTimeout * 1000) + 1_000
        clusterNode.presencePending = clusterNode.presencePending.filter {
            now &- $0.value < ($0.key.hasPrefix("e.") ? Server.presenceAliveEvery : retry)
        }
        let me = cluster.publisher
        for session in sessions.unheld(by: me) {
            let key = "d.\(session.id).\(session.epoch)"
            guard clusterNode.presencePending[key] == nil else { continue }
            clusterNode.presencePending[key] = now
            submitPresenceEntry(cluster, ["k": .string("detach"), "id": .string(session.id),
                                          "epoch": .int(Int64(bitPattern: session.epoch))])
        }
        // Every node, while there are sessions: holders so that nobody ends theirs, all so that the stream's
        // active time goes on while it takes entries (`StreamIntegrity.activeTime`).
        if now &- cluster.lastBatchTakenAt >= Server.presenceAliveEvery {
            submitPresenceEntry(cluster, ["k": .string("alive")])
        }
        let due = sessions.dueReplicated(now: cluster.integrity.activeTime(at: clock.wallMilliseconds),
                                         window: Server.presenceLivenessWindow) {
            cluster.integrity.lastHeard($0)
        }
        for session in due where session.holder != me {
            let key = "e.\(session.id).\(session.epoch)"
            guard clusterNode.presencePending[key] == nil else { continue }
            clusterNode.presencePending[key] = now
            submitPresenceEntry(cluster, ["k": .string("end"), "id": .string(session.id),
                                          "epoch": .int(Int64(bitPattern: session.epoch))])
        }
    }

    /// Queues the server's own presence operation (`context`; no line, nobody answered, dropped at the write
    /// deadline like any write: `replicatedPresenceTick` appends it again while it is still due).
    private func submitPresenceEntry(_ cluster: ClusterReplicator, _ context: [String: JSONValue]) {
        cluster.submit(line: [], user: nil, presence: .object(context),
                       writer: ClusterReplicator.Writer(connection: Server.clusterConnection, requestID: nil,
                                                        operation: MetricsOperation(.endSession),
                                                        deadline: clock.milliseconds &+ UInt64(cluster.configuration.writeTimeout * 1000)))
    }

    /// The replicated sessions as `digest` and snapshots carry them: `[id, record]`, by id.
    var replicatedSessionRecords: [JSONValue] {
        sessions.sessions.keys.sorted().map { .array([.string($0), sessions.sessions[$0]!.record]) }
    }
}
