import KVOEngine
import KVOJSON
import KVOModel
import Logging

/// The rows about the server's own state, which the engine does not hold (`OperationRoute.serverState`): `clients`
/// lists the connections, `kill` closes one, `slow` shows the slow-request log (`Server+SlowLog`). Node-local: in a
/// cluster each node answers for itself. Loop thread only, like the rest of `Server`.
extension Server {
    /// Answers a `serverState` row: admitted by its row first (server admins), as every route is.
    func answerServerState(_ request: Request, id: JSONValue?, connection: Connection) {
        let operation = request.operation
        let label = MetricsOperation(request)
        let budget = ReplyBudget(outputLimit: configuration.maximumOutputBufferBytes, queued: connection.outputBytes, id: id)
        do throws(KVOError) {
            try operation.declaration.admit(connection.access)
            switch request {
            case let .slow(reset):
                send(.success(ReplyFields(try slowReply(reset: reset, budget: budget))), id: id, to: connection, counting: label)
            case .clients:
                send(.success(ReplyFields(try clientsReply(for: connection, budget: budget))), id: id, to: connection,
                     counting: label)
            case let .kill(target):
                kill(target, id: id, from: connection)
            default:
                preconditionFailure("\(operation.name) is not routed to the server's state")
            }
        } catch {
            send(.failure(error), id: id, to: connection, counting: label)
        }
    }

    /// The open connections (`slots`), by id.
    private var openConnectionList: [Connection] {
        slots.compactMap { $0?.takeUnretainedValue() }.sorted { $0.id < $1.id }
    }

    /// `clients`: every open connection, by id (the caller's own included, marked `own`).
    func clientsReply(for caller: Connection, budget: ReplyBudget) throws(KVOError) -> [(String, JSONValue)] {
        let now = clock.wallMilliseconds
        let listing = openConnectionList.map { connection -> JSONValue in
            var members: [String: JSONValue] = [
                "connection": .int(Int64(connection.id.rawValue)),
                "kind": .string(connection.metricsTransport.label),
                "address": .string(connection.peer),
                "user": connection.principal?.user.map(JSONValue.string) ?? .null,
                "age": Server.elapsedSeconds(now - connection.openedAt),
                "idle": Server.elapsedSeconds(now - (connection.lastRequestAt == 0 ? connection.openedAt : connection.lastRequestAt)),
                "observations": .int(Int64(handler.engine.observationCount(of: connection.id))),
                "outputBytes": .int(Int64(connection.outputBytes)),
                "session": sessions.sessionID(of: connection.id).map(JSONValue.string) ?? .null,
            ]
            if connection === caller { members["own"] = .bool(true) }
            return .object(members)
        }
        let list = JSONValue.array(listing)
        try RequestHandler.requireFit(list, budget, "the \(listing.count) connections")
        return [("clients", list)]
    }

    /// Seconds as a number with millisecond precision (never negative: the wall clock may have been set back).
    private static func elapsedSeconds(_ milliseconds: Int64) -> JSONValue {
        .double(Double(max(milliseconds, 0)) / 1000)
    }

    /// `kill`: closes connection `target` as a disconnect would (its observations end, its session waits its grace),
    /// after telling it why (one `closed` error without id; a WebSocket gets a close frame, an HTTP connection is
    /// just closed). Killing the caller's own connection answers first, then closes it once the reply is written.
    /// An id no open connection has (never given, closed, or past every id) is `not_found`.
    func kill(_ target: UInt64, id: JSONValue?, from caller: Connection) {
        guard let victim = slots.lazy.compactMap({ $0?.takeUnretainedValue() }).first(where: { $0.id.rawValue == target }),
              !victim.isClosing else {
            send(.failure(KVOError(.notFound, "no open connection has id \(target) (clients lists them)")), id: id, to: caller,
                 counting: .kill)
            return
        }
        let reason = CloseReason.killed(by: caller.id, user: caller.principal?.user)
        logger.notice("connection closed by kill", metadata: [
            "connection": "\(victim.id)", "peer": "\(victim.peer)", "by": "\(caller.id)",
            "user": "\(caller.principal?.user ?? "-")",
        ])
        let own = victim === caller
        if !own { tellAndClose(victim, reason: reason) }
        send(.success([("connection", .int(Int64(target))), ("own", .bool(own))]), id: id, to: caller, counting: .kill)
        if own { tellAndClose(victim, reason: reason) }
    }

    /// Sends `closed` (without id) where the connection speaks JSON messages, after what is queued for it, and
    /// closes it once written (this iteration's flush). A connection that could not take that (a write already
    /// waiting for the client to read, a TLS handshake not finished, an HTTP connection) is closed at once, its
    /// queued output dropped: a kill never waits on the client.
    private func tellAndClose(_ connection: Connection, reason: CloseReason) {
        guard connection.metricsTransport != .http, connection.inFlightBytes == 0, !connection.isAwaitingTLSHandshake else {
            connection.close(reason: reason)
            return
        }
        var bytes: [UInt8] = []
        ReplyEncoder.failure(id: nil, error: KVOError(.closed, "\(reason)"), into: &bytes)
        connection.sendAndClose(bytes, reason: reason)
    }
}
