import CLibUV
import KVOJSON
import KVOModel
import Logging
#if canImport(Glibc)
import Glibc
import KVOEngine
#endif

/// One request line from a connection to its reply: gating before login, routing (engine, authentication, administration, cluster), and replies with their metrics.
/// Loop thread only, like the rest of `Server`.
extension Server {
    /// `startedAt`: when the line was first received, for a request held and handled later (`ExpiryHolds`).
    func handleLine(_ line: UnsafeBufferPointer<UInt8>, from connection: Connection, startedAt: UInt64? = nil) {
        if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { return }
        // The request's clock (`ServerClock.nanoseconds`): read here and when its reply is queued (`requestAnswered`),
        // for `kvod_request_duration_seconds` and the slow-request log (`SlowLog`), which share both reads. A line held
        // and handled later is timed from its arrival for the metric, and from here for the log (the loop's time).
        let outer = requestStarted
        let begun = clock.nanoseconds
        requestStarted = startedAt ?? begun
        slowLog.answeredAt = 0
        defer {
            requestStarted = outer
            if slowLog.answerWasSlow(begun: begun) { recordSlowRequest(line, from: connection, begun: begun) }
        }
        connection.hasSentRequest = true
        // The request's time (`Server+Expiry`): the loop's, read once per iteration (`ServerClock`); an object past
        // its deadline is expired before the request can read it (or, behind a backlog, the request waits for it).
        let now = clock.wallMilliseconds
        connection.lastRequestAt = now
        if handler.engine.expiryCheckAt <= now, !expireDueObjectsBeforeReads() {
            holdForExpiryBacklog(line, from: connection, started: requestStarted)
            return
        }
        // Before a login (users defined) only hello, auth and ping are looked at: docs/protocol.md.
        let decoded = connection.principal == nil ? RequestDecoder.decodeBeforeLogin(line) : RequestDecoder.decode(line)
        // Cluster mode: after writes in flight on this connection, only more writes go on at once (they join
        // the next batch); anything else waits until those writes are answered, to be answered after them.
        if let clusterNode, clusterNode.pipelinedWrites.count(of: connection.id) > 0, !Server.joinsPipeline(decoded, connection) {
            clusterNode.pipelinedWrites.hold(.line(Array(line)), for: connection.id)
            connection.pauseReading(.replication)
            return
        }
        let request: Request
        switch decoded.request {
        case let .success(value): request = value
        case let .failure(error):
            send(.failure(error), id: decoded.id, to: connection, counting: .invalid)
            return
        }
        // Everything below reads the operation's row (`OperationTable`): who may send it, who answers it,
        // whether it is replicated.
        let declaration = request.operation.declaration
        // Only `beforeLogin` rows are decoded before a login; a line held from before a login that has
        // since been undone (open mode ended) is gated here.
        guard connection.principal != nil || declaration.beforeLogin else {
            send(.failure(Server.notAuthenticated), id: decoded.id, to: connection, counting: declaration.metrics)
            return
        }
        // The one door for the store's health: while it cannot take writes (`StorageHealth`), every row
        // that changes what is stored is refused here, whatever its route; reads and observations go on. Past
        // `--max-disk` only, the rows that only remove what is stored are taken (they are how room is made).
        if declaration.isStored, let refusal = storage.refusal, !(declaration.freesSpace && storage.admitsFreeingWrites) {
            send(.failure(refusal), id: decoded.id, to: connection, counting: declaration.metrics)
            return
        }
        switch declaration.route {
        case .engine:
            break
        case .authentication:
            guard case let .auth(credentials) = request else { preconditionFailure("\(declaration.name) is routed to authentication") }
            authenticate(credentials, id: decoded.id, connection: connection)
            return
        case .administration:
            guard case let .admin(adminRequest) = request else { preconditionFailure("\(declaration.name) is routed to administration") }
            administer(adminRequest, id: decoded.id, connection: connection)
            return
        case .presence:
            // Cluster mode: sessions are replicated state, changed at stream positions (`Server+ReplicatedPresence`).
            if let cluster {
                submitPresence(cluster, request, line: line, id: decoded.id, connection: connection)
                return
            }
            presence(request, id: decoded.id, connection: connection)
            return
        case .serverState:
            answerServerState(request, id: decoded.id, connection: connection)
            return
        case .storage:
            maintainStorage(request, id: decoded.id, connection: connection)
            return
        }
        // An ephemeral create needs the connection's session (docs/protocol.md, "Presence"), which it joins once
        // it succeeded.
        var ephemeralSession: String?
        if request.isEphemeralWrite {
            do throws(KVOError) {
                ephemeralSession = try self.ephemeralSession(for: connection)
            } catch {
                send(.failure(error), id: decoded.id, to: connection, counting: declaration.metrics)
                return
            }
        }
        if declaration.isWrite {
            if let cluster {
                // An ephemeral create names the attachment it was made under: every node adds the object to that session.
                submitToCluster(cluster, request, line: line, id: decoded.id, connection: connection,
                                presence: ephemeralSession.flatMap { sessions.session($0) }.map(Server.attachment))
                return
            }
            groupCommit.noteWriter(connection.id)
            // The write's time (`Server+Expiry`): the request's, above; no clock is read here.
            let budget = ReplyBudget(outputLimit: configuration.maximumOutputBufferBytes, queued: connection.outputBytes,
                                     id: decoded.id)
            let reply = applyWrite(request, from: connection.id, access: connection.access, budget: budget, time: now,
                                   ephemeralSession: ephemeralSession)
            send(reply, id: decoded.id, to: connection, counting: declaration.metrics)
            return
        }
        if declaration.effect == .signals {
            sendSignal(request, id: decoded.id, connection: connection)
            return
        }
        if let atLeastRev = decoded.atLeastRev, atLeastRev > handler.engine.revision {
            holdForRevision(atLeastRev, request, decoded: decoded, connection: connection)
            return
        }
        perform(request, id: decoded.id, connection: connection)
    }

    /// Whether a request is a write that may be submitted to the cluster behind this connection's writes in
    /// flight: a decoded write from a logged-in connection (anything else is answered in order after them).
    /// Not an admin operation: some are answered at once (`userList`, a refusal, a password being hashed
    /// first), so it waits for the writes before it and is then counted with them (`commit`).
    static func joinsPipeline(_ decoded: RequestDecoder.Decoded, _ connection: Connection) -> Bool {
        guard connection.principal != nil, case let .success(request) = decoded.request else { return false }
        let declaration = request.operation.declaration
        // An ephemeral create needs the session a `session` still in flight may bring: it waits for it.
        return declaration.route == .engine && declaration.isWrite && !request.isEphemeralWrite
    }

    /// Carries out a request that is not a write (writes pass `applyWrite`), replies and delivers its events;
    /// whether it succeeded. Loop thread.
    @discardableResult
    func perform(_ request: Request, id: JSONValue?, connection: Connection) -> Bool {
        notifications.removeAll(keepingCapacity: true)
        let budget = ReplyBudget(outputLimit: configuration.maximumOutputBufferBytes, queued: connection.outputBytes,
                                 id: id)
        if case let .hello(_, events?) = request { connection.eventEncoding = events }
        let outcome = handler.handle(request, from: connection.id,
                                     access: connection.access, budget: budget,
                                     eventEncoding: connection.eventEncoding, notifications: &notifications)
        let operation = MetricsOperation(request)
        switch outcome.order {
        case .afterNotifications:
            deliverNotifications()
            deliverBindingEvents()
            send(outcome.reply, id: id, to: connection, counting: operation)
        case .beforeNotifications:
            send(outcome.reply, id: id, to: connection, counting: operation)
            deliverNotifications()
            deliverBindingEvents()
        }
        if case .success = outcome.reply { return true }
        return false
    }

    /// Queues a reply; `counting` names the request's operation for `kvod_requests_total` and
    /// `kvod_request_duration_seconds` (nil: not a request's answer, or counted elsewhere). The duration runs
    /// from `startedAt` (nil: `requestStarted`, the request being handled) to now; none is counted without
    /// a start.
    func send(_ reply: Result<ReplyFields, KVOError>, id: JSONValue?, to connection: Connection,
                      counting operation: MetricsOperation? = nil, startedAt: UInt64? = nil) {
        if let operation {
            switch reply {
            case .success: metrics.countRequest(operation, error: nil)
            case let .failure(error): metrics.countRequest(operation, error: error.code)
            }
            requestAnswered(operation, startedAt: startedAt ?? requestStarted)
        }
        Server.empty(&replyBuffer)
        switch reply {
        case let .success(fields): ReplyEncoder.success(id: id, fields: fields, into: &replyBuffer)
        case let .failure(error): ReplyEncoder.failure(id: id, error: error, into: &replyBuffer)
        }
        connection.enqueueReply(replyBuffer)
        if loop.outputChunks.bytesInUse > configuration.maximumTotalOutputBytes { enforceTotalOutputLimit() }
    }

    /// Counts a request of `operation` answered now in `kvod_request_duration_seconds`, its handling having
    /// begun at `started` (`ServerClock.nanoseconds`; 0: unknown, not counted), and notes the answer's time and the
    /// request for the slow-request log and the loop iteration's activity (`SlowLog`).
    @inline(__always)
    func requestAnswered(_ operation: MetricsOperation, startedAt started: UInt64) {
        guard started != 0 else { return }
        let now = clock.nanoseconds
        metrics.requestAnswered(operation, nanoseconds: now &- started)
        slowLog.answeredAt = now
        slowLog.activity.requests &+= 1
    }

    /// Runs `body` as the continuation of a request whose handling began at `started` (a password check
    /// back, a hash made, an `atLeastRev` reached): what it answers is timed from there.
    func continuingRequest(startedAt started: UInt64, _ body: () -> Void) {
        let outer = requestStarted
        requestStarted = started
        defer { requestStarted = outer }
        body()
    }
}
