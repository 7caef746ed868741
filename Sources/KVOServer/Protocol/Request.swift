import KVOEngine
import KVOJSON
import KVOModel

/// A decoded, validated client request (docs/protocol.md, "Operations"). Each case is an instance of an
/// `ProtocolOperation` (`operation`), whose row in `OperationTable` says everything else about it.
package enum Request: Equatable, Sendable {
    /// `events`: the event encoding asked for (nil: leave the connection's as it is).
    case hello(client: String?, events: EventEncoding? = nil)
    /// `auth`: log in as a user (answered by the server, not the engine: `Server.authenticate`).
    case auth(AuthCredentials)
    /// User management (answered by the server: `Server.administer`).
    case admin(AdminRequest)
    /// `className` names a class defined with `defineClass`; nil for a free-form object.
    case create(object: String, values: [String: JSONValue], className: String? = nil)
    case delete(object: String)
    case get(object: String, keyPath: KeyPath?)
    /// `value`: as text when the request carried it in canonical form (not decoded until something reads it).
    case set(object: String, keyPath: KeyPath, value: HeldValue)
    /// Adds `by` (an integer or a finite number) to the number at `keyPath` (a missing or null value
    /// counts as 0); replies with the new value.
    case increment(object: String, keyPath: KeyPath, by: JSONValue)
    /// `insert`, `remove` and `replace` on the array at `keyPath`.
    case mutateArray(object: String, keyPath: KeyPath, mutation: CollectionMutation)
    case observe(object: String, keyPath: KeyPath, options: ObservationOptions, sinceRev: UInt64?)
    /// `observe` with `pattern` (no `object`): the ids matching it (`keyPath` nil), or a key path on
    /// each matching object, present and future; with `filter` (`where`), a live query.
    case observePattern(pattern: ObjectIDPattern, keyPath: KeyPath?, filter: LiveQuery?, options: ObservationOptions,
                        sinceRev: UInt64?)
    case unobserve(subscription: SubscriptionID)
    /// `list`: at most `limit` ids (all when nil) after `after` (from the first when nil), in sorted order.
    case list(limit: Int?, after: String?)
    case info(object: String)
    case ping
    /// `defineClass`: the definition as sent (checked by the engine).
    case defineClass(definition: JSONValue)
    case classes
    /// `bind` and `combineLatest`; `now` applies the current value(s) at once.
    case bind(BindingSpec, now: Bool)
    case unbind(binding: UInt64)
    case bindings
    /// `digest`: a SHA-256 of the stored state (`StateDigest`), to compare cluster nodes.
    case digest
    /// `access`: what the connection's user may do, on each of `objects` and anywhere (for a client that shows
    /// only the controls the user may use, such as the inspector).
    case access(objects: [String])
    /// `metrics`: what `GET /metrics` serves (the Prometheus text), over the protocol, for a server admin.
    case metrics
    /// `status`: the server at a glance (`ServerStatusReport`), for a server admin.
    case status
    /// `config`: every setting in force and where it came from (`SettingInForce`), for a server admin.
    case configuration
    /// `batch`: writes of objects applied all or nothing with one revision (`KVOEngine+Batch`). Each part
    /// was decoded as a request line of its own (so it carries its conditions), is a row with
    /// `batchable`, and there is at least one and at most `KVOEngine.maximumBatchParts`.
    case batch([Request])
    /// A write that carried modifiers (`WriteModifiers`: conditions, `ttl`, `ephemeral`), of a row that accepts
    /// them. Made by the decoder, so every path that hands a decoded line to the engine (a live request, a
    /// replicated one, a batch part, a session's action, the server's own write) carries them, and
    /// `RequestHandler` applies them in the write's turn. Never empty, never nested.
    indirect case modified(WriteModifiers, Request)
    /// `touch`: the object's deadline moves to now plus its ttl.
    case touch(object: String)
    /// `expire`: the server deletes an object whose time to live ended, unless it changed after `changedRev`.
    case expire(object: String, changedRev: UInt64)
    /// `session`: begins a session for the connection (`resume` nil) or takes over the session `resume`
    /// names; `grace` in milliseconds (nil: the server's default).
    case session(resume: String?, grace: Int64?)
    /// `onDisconnect`: `write` (decoded from `line`, the canonical JSON of the request object) runs when the
    /// connection's session ends.
    indirect case onDisconnect(line: [UInt8], write: Request)
    /// `cancelOnDisconnect`: the action numbered `action` (nil: every action) is dropped.
    case cancelOnDisconnect(action: UInt64?)
    /// `endSession`: the session's actions run now and it ends.
    case endSession
    /// `slow`: the slow-request log (`SlowLog`), emptied after the reply when `reset`.
    case slow(reset: Bool)
    /// `clients`: the server's connections.
    case clients
    /// `kill`: closes the connection whose id is `connection`.
    case kill(connection: UInt64)
    /// `backup`: a consistent copy of the database made (`offset` nil), or its next chunk from `offset` (`Server+Backup`).
    case backup(offset: Int64?)
    /// `compact`: the database's free pages given back to the file system (`Server+Compaction`).
    case compact
    /// `signal`: `payload` (its compact JSON) goes to the observers of `object`, stored nowhere.
    case signal(object: String, payload: HeldValue)
}

extension Request {
    /// The object a write names (`object`), nil for requests that name none.
    var writtenObject: String? {
        switch self {
        case let .create(object, _, _), let .delete(object), let .set(object, _, _), let .increment(object, _, _),
             let .mutateArray(object, _, _), let .touch(object), let .expire(object, _):
            object
        case let .modified(_, request):
            request.writtenObject
        default:
            nil
        }
    }

    /// Whether it is a write with `ephemeral: true`: read on every write's path, so a plain write answers from its case
    /// alone (binding the payload of a case would copy the request: measured, docs/performance.md, issue 41).
    @inline(__always)
    var isEphemeralWrite: Bool {
        guard case .modified = self, case let .modified(modifiers, _) = self else { return false }
        return modifiers.ephemeral
    }
}
