import KVOEngine
import KVOJSON
import KVOModel
import KVOVersion

/// Carries out one decoded request against the engine and shapes its reply: `handle` admits it by its row and calls
/// the operation's handler (`handler(of:)`, as Redis's command table names each command's function), after a write's
/// modifiers (`performModified`). The handlers are in `RequestHandler+Objects` (writes and reads of
/// objects, batches), `RequestHandler+Observations` (observe, list, info) and `RequestHandler+ServerRows` (hello,
/// classes, bindings, digest, access, metrics).
///
/// Owns the engine. Loop thread only.
final class RequestHandler {
    /// Where the reply goes relative to the notifications the request caused.
    enum ReplyOrder {
        /// Changes notify first: observers hear of a change by the time its setter returns.
        case afterNotifications
        /// The reply first (an `observe` reply precedes its `initial` event).
        case beforeNotifications
    }

    struct Outcome {
        var reply: Result<ReplyFields, KVOError>
        var order: ReplyOrder
    }

    /// Who sent a request and what its answer may take: what a row's handler is given besides the request. `access`
    /// is the sender's rights (docs/protocol.md, "Permissions"); `budget` bounds a reply that could be large
    /// (`ReplyBudget`); `eventEncoding` is the connection's, after this request when it is a `hello` choosing one.
    struct Call {
        let connection: ConnectionID
        let access: ConnectionAccess
        let budget: ReplyBudget
        let eventEncoding: EventEncoding
    }

    /// An operation's handler (`handler(of:)`): carries out a request of that operation, appending the changes it makes
    /// to `notifications`. A refusal is thrown, and changes nothing.
    typealias Perform = @Sendable (RequestHandler, Request, Call, inout [ChangeNotification]) throws(KVOError) -> Outcome

    static let serverName = "kvod"
    /// `KVODVersion.version`: the one place the version is written.
    static let serverVersion = KVODVersion.version
    static let protocolVersion: Int64 = 1

    /// Replaced only when a cluster node installs a snapshot while it serves (`Server.installSnapshotInPlace`).
    var engine: KVOEngine
    /// In cluster mode: this node's place in the cluster (`ClusterStatus`), for `digest`'s reply.
    var clusterStatus: (() -> ClusterStatus)?
    /// Cluster mode: the replicated presence sessions as `[id, record]`, by id (`digest` covers them).
    var replicatedSessions: (() -> [JSONValue])?
    /// What `GET /metrics` serves now (set by the server), for the `metrics` operation.
    var metricsText: (() -> [UInt8])?
    /// The server at a glance, for `status`: assembled by the server (`Server.statusReport()`), the one place
    /// every part adds its fields.
    var statusReport: (() -> [(String, JSONValue)])?
    /// Every setting in force with where it came from, for `config` (`Server.configurationReport()`).
    var configurationReport: (() -> [(String, JSONValue)])?
    /// The server's users, for `digest` (replicated state in a cluster). Set by the server before it serves.
    var users: UserDirectory?

    init(engine: KVOEngine) {
        self.engine = engine
    }

    /// Carries out `request` for `connection`, with the rights of `access` (the connection's principal:
    /// docs/protocol.md, "Permissions"; a denial is `forbidden` and changes nothing). Its operation's row
    /// admits `access` first (`OperationDeclaration.admit`): every request the engine answers passes here (live,
    /// replicated, a session's action, the server's own). A reply that could be large is measured against `budget`
    /// first and refused with `too_large` when it would not fit (see `ReplyBudget`). `eventEncoding` is the
    /// connection's (after this request, when it is a `hello` choosing one): `hello` reports it, and an `observe`
    /// makes its observation with it.
    func handle(_ request: Request, from connection: ConnectionID, access: ConnectionAccess,
                budget: ReplyBudget = .unlimited, eventEncoding: EventEncoding = .full,
                notifications: inout [ChangeNotification]) -> Outcome {
        do {
            // The operation, not its row: a row is a large value, and reading one field of it in place costs nothing
            // where a copy would retain every reference it holds (measured: docs/performance.md, issue 41).
            let operation = request.operation
            try operation.declaration.admit(access)
            let call = Call(connection: connection, access: access, budget: budget, eventEncoding: eventEncoding)
            return try perform(request, operation, call, &notifications)
        } catch {
            return Outcome(reply: .failure(error), order: .afterNotifications)
        }
    }

    /// `request`, admitted, by its operation's handler (`handler(of:)`); a write with modifiers through
    /// `performModified` first.
    @inline(__always)
    func perform(_ request: Request, _ operation: ProtocolOperation, _ call: Call,
                 _ notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        if case let .modified(modifiers, write) = request {
            return try performModified(write, operation, modifiers, call, &notifications)
        }
        return try Self.handler(of: operation)(self, request, call, &notifications)
    }

    /// The handler table: each operation the engine answers (`OperationRoute.engine`) names its function here, as
    /// Redis's command table names each command's, once, with no `default:`, so that a new operation does not compile
    /// until it names one. (The row itself, in Protocol/, cannot name it: that layer does not see the server's types.)
    @inline(__always)
    static func handler(of operation: ProtocolOperation) -> Perform {
        switch operation {
        case .hello: hello
        case .ping: ping
        case .create: create
        case .delete: delete
        case .get: get
        case .set: set
        case .increment: increment
        case .insert, .remove, .replace: mutateArray
        case .batch: batch
        case .touch: touch
        case .expire: expire
        case .observe: observe
        case .unobserve: unobserve
        case .list: list
        case .info: info
        case .defineClass: defineClass
        case .classes: classes
        case .bind, .combineLatest: bind
        case .unbind: unbind
        case .bindings: bindings
        case .digest: digest
        case .access: access
        case .metrics: metrics
        case .status: status
        case .config: config
        case .signal: signal
        case .auth, .session, .onDisconnect, .cancelOnDisconnect, .endSession, .userAdd, .userRemove, .userList,
             .userPasswd, .userGrant, .userRevoke, .tokenCreate, .tokenRevoke, .slow, .clients, .kill, .backup, .compact:
            answeredByTheServer
        }
    }

    /// The operations the server answers itself (passwords are checked and hashed off the loop thread; sessions are
    /// the server's, not the engine's): never handed to the engine.
    static func answeredByTheServer(_ handler: RequestHandler, _ request: Request, _ call: Call,
                                    _ notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        throw KVOError(.badRequest, "answered by the server")
    }

    /// The one door for a write's modifiers (`WriteModifiers`), whatever path brought the write (a live request, a
    /// replicated entry, a batch part, a session's action, the server's own write): its conditions checked on the
    /// write's object in this turn, then the write, then its time to live set on that object in the same turn. An
    /// ephemeral object joins its session in the server's write path (`Server.applyWrite`), once this succeeded.
    private func performModified(_ write: Request, _ operation: ProtocolOperation, _ modifiers: WriteModifiers,
                                 _ call: Call, _ notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        guard let object = write.writtenObject else { throw KVOError(.badRequest, "write modifiers go with writes of one object") }
        if let conditions = modifiers.conditions {
            do {
                try engine.check(conditions, on: object, access: call.access)
            } catch where error.code == .conflict {
                throw Self.fitted(error, call.budget)
            }
        }
        let outcome = try perform(write, operation, call, &notifications)
        if let ttl = modifiers.ttl { try engine.setTTL(object, milliseconds: ttl) }
        return outcome
    }

    /// A handler called for a request of another operation: a mistake in the handler table, which
    /// `OperationTableTests` (every row's example handled) finds first.
    static func misrouted(_ request: Request, _ handler: StaticString) -> Never {
        preconditionFailure("\(handler) was named by the row of '\(request.operation.name)'")
    }

    /// A `conflict` whose current `value` would not fit in `budget` (an `ifEquals` on a key path holding
    /// megabytes) without that value: `valueTooLarge: true` instead, as a `get` of it would be `too_large`.
    /// The reply stays as small as the request's own error.
    static func fitted(_ conflict: KVOError, _ budget: ReplyBudget) -> KVOError {
        // 1 KiB kept for the message and the other details.
        guard let value = conflict.details["value"], JSONSizeBound.of(value, limit: budget.bytes - 1024) == nil else { return conflict }
        var details = conflict.details
        details["value"] = nil
        details["valueTooLarge"] = true
        return KVOError(.conflict, conflict.message + " (the current value is too large for this reply)", details: details)
    }

    /// Refuses with `too_large` when `value` would not fit in `budget` (measured with an early stop,
    /// never encoded).
    static func requireFit(_ value: JSONValue, _ budget: ReplyBudget, _ what: @autoclosure () -> String) throws(KVOError) {
        guard JSONSizeBound.of(value, limit: budget.bytes) == nil else { return }
        throw budget.refusal(what())
    }

    static func reply(_ fields: [(String, JSONValue)]) -> Outcome {
        Outcome(reply: .success(ReplyFields(fields)), order: .afterNotifications)
    }

    /// The reply to a write: `{"rev":R}`, held as the number (`ReplyFields.revision`).
    static func replyRevision(_ rev: UInt64) -> Outcome {
        Outcome(reply: .success(.revision(rev)), order: .afterNotifications)
    }

    static func revision(_ rev: UInt64) -> JSONValue {
        .int(Int64(rev))
    }
}
