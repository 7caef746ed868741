import KVOEngine
import KVOModel

/// The `op` label of `kvod_requests_total` and `kvod_request_duration_seconds`: the protocol's operation names, `admin` for the user
/// administration operations and `invalid` for a request kvod could not decode (malformed JSON, a
/// missing or unknown `op`, a mistyped field). A small closed set, so the series stay few.
enum MetricsOperation: Int, CaseIterable {
    case hello, auth, admin, create, delete, get, set, increment, insert, remove, replace, batch, touch, expire, observe, unobserve, list, info, ping
    case defineClass, classes, bind, unbind, bindings, digest, access, metrics, status, config
    case session, onDisconnect, cancelOnDisconnect, endSession
    case slow, clients, kill
    case backup, compact
    case signal
    case invalid

    /// The operation of a decoded request: its row's label (`OperationDeclaration.metrics`). Borrowed: an
    /// initializer takes its arguments owned, which made each caller copy the request (issue 41, measured).
    @inline(__always)
    init(_ request: borrowing Request) {
        self = request.operation.declaration.metrics
    }

    /// The label value.
    var name: String {
        switch self {
        case .hello: "hello"
        case .auth: "auth"
        case .admin: "admin"
        case .create: "create"
        case .delete: "delete"
        case .get: "get"
        case .set: "set"
        case .increment: "increment"
        case .insert: "insert"
        case .remove: "remove"
        case .replace: "replace"
        case .batch: "batch"
        case .touch: "touch"
        case .expire: "expire"
        case .observe: "observe"
        case .unobserve: "unobserve"
        case .list: "list"
        case .info: "info"
        case .ping: "ping"
        case .defineClass: "defineClass"
        case .classes: "classes"
        case .bind: "bind"
        case .unbind: "unbind"
        case .bindings: "bindings"
        case .digest: "digest"
        case .metrics: "metrics"
        case .access: "access"
        case .status: "status"
        case .config: "config"
        case .session: "session"
        case .onDisconnect: "onDisconnect"
        case .cancelOnDisconnect: "cancelOnDisconnect"
        case .endSession: "endSession"
        case .slow: "slow"
        case .clients: "clients"
        case .kill: "kill"
        case .backup: "backup"
        case .compact: "compact"
        case .signal: "signal"
        case .invalid: "invalid"
        }
    }
}
