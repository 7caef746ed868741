/// The `op` label of `kvod_requests_total`: the protocol's operation names, `admin` for the user
/// administration operations and `invalid` for a request kvod could not decode (malformed JSON, a
/// missing or unknown `op`, a mistyped field). A small closed set, so the series stay few.
enum MetricsOperation: Int, CaseIterable {
    case hello, auth, admin, create, delete, get, set, insert, remove, replace, observe, unobserve, list, info, ping
    case defineClass, classes, bind, unbind, bindings, digest
    case invalid

    /// The operation of a decoded request.
    init(_ request: Request) {
        switch request {
        case .hello: self = .hello
        case .auth: self = .auth
        case .admin: self = .admin
        case .create: self = .create
        case .delete: self = .delete
        case .get: self = .get
        case .set: self = .set
        case let .mutateArray(_, _, mutation):
            switch mutation {
            case .insert: self = .insert
            case .remove: self = .remove
            case .replace: self = .replace
            }
        case .observe, .observePattern: self = .observe
        case .unobserve: self = .unobserve
        case .list: self = .list
        case .info: self = .info
        case .ping: self = .ping
        case .defineClass: self = .defineClass
        case .classes: self = .classes
        case .bind: self = .bind
        case .unbind: self = .unbind
        case .bindings: self = .bindings
        case .digest: self = .digest
        }
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
        case .insert: "insert"
        case .remove: "remove"
        case .replace: "replace"
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
        case .invalid: "invalid"
        }
    }
}
