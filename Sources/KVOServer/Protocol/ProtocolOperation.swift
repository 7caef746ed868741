import KVOJSON
import KVOEngine
import KVOModel

/// Every operation of the protocol: the one list (docs/protocol.md, "Operations").
///
/// An operation is a case here and a row in `OperationTable.declaration(of:)`, whose switch has no
/// `default:`: a new case does not compile until its row says how it is decoded, whether it writes
/// (and so is replicated), what a caller must be allowed, how it is counted and who answers it.
/// Dispatch (`Server.handleLine`), the login gate (`RequestDecoder.decodeBeforeLogin`), replication
/// (`Server.submitToCluster`, `Server.applyClusterEntry`), permission gating (`OperationDeclaration.admit`)
/// and metrics (`MetricsOperation`) read the row; none of them lists operations again.
///
/// A value; any thread.
package enum ProtocolOperation: Int, CaseIterable, Sendable {
    case hello, auth, ping
    case create, delete, get, set, increment, insert, remove, replace, batch, touch, expire
    case list, info, observe, unobserve
    case defineClass, classes
    case bind, combineLatest, unbind, bindings
    case digest, access, metrics, status, config
    case backup, compact
    case session, onDisconnect, cancelOnDisconnect, endSession
    case userAdd, userRemove, userList, userPasswd, userGrant, userRevoke, tokenCreate, tokenRevoke
    case slow, clients, kill
    case signal

    /// This operation's row of the table.
    @inline(__always)
    package var declaration: OperationDeclaration { OperationTable.rows[rawValue] }

    /// The wire name (`op`).
    package var name: String { declaration.name }

    /// The operation named `op` on the wire, nil for an unknown name. Looks at the names of `op`'s
    /// length only (one or two comparisons for the common operations), never hashes.
    /// The operation named by `text` (an `op` string's bytes, without escapes), looked up without making a
    /// `String` when the name has at most eight bytes; nil when no operation has that name.
    init?(nameText text: UnsafeBufferPointer<UInt8>) {
        if let index = OperationTable.shortNames.index(of: text) {
            self = ProtocolOperation.allCases[index]
            return
        }
        guard text.count > 8 else { return nil }
        self.init(named: String(decoding: text, as: UTF8.self))
    }

    package init?(named op: String) {
        let length = op.utf8.count
        guard length < OperationTable.byLength.count else { return nil }
        for candidate in OperationTable.byLength[length] where candidate.declaration.name == op {
            self = candidate
            return
        }
        return nil
    }
}

/// What an operation does to the server's state: what replication and the cluster's read-your-writes
/// follow.
package enum OperationEffect: Sendable {
    /// Changes only the connection's own state (its encoding, its login, its subscriptions): answered by
    /// the node it reaches, never replicated.
    case connection
    /// Reads state: answered by the node it reaches from its own copy (after `atLeastRev` when the
    /// operation accepts one), never replicated.
    case reads
    /// Changes replicated state: in cluster mode it goes through the stream and every node applies it in
    /// stream order; a single node applies it and makes it durable with the loop iteration's group commit.
    case writes
    /// Changes this node's stored sessions (`onDisconnect` and the rest of Presence): never replicated (the
    /// writes a session runs when it ends are, as writes), but stored with the group commit, so refused like a
    /// write while the store cannot take writes.
    case storesSession
    /// Changes nothing: hands a transient payload to the observers of an object (`signal`): this node's at once,
    /// in cluster mode the other nodes' through a NATS core subject, never the stream. Not stored, so taken while
    /// the store refuses writes; not replicated, so taken while the stream is unavailable.
    case signals
}

/// What a caller must be allowed for an operation (docs/protocol.md, "Permissions").
package enum OperationRequirement: Sendable, Equatable {
    /// Nothing beyond being logged in (or, for the operations allowed before login, nothing).
    case nothing
    /// `read` on every object the operation reaches: the engine's one way of reading checks it
    /// (`KeyPathEvaluator` with a reader), before anything in an unreadable object is looked at.
    case readObjects
    /// `write` on every object written and `read` on every object read on the way (references followed,
    /// values read): `KVOEngine`'s write resolution checks it.
    case writeObjects
    /// Bindings: making one needs `admin` and `write` on its target and `read` on every object its
    /// sources read (re-checked as its creator's rules change); removing one needs `admin` on its target,
    /// and listing shows the bindings whose target the caller administers. `KVOEngine+Bindings` checks it.
    case adminOnBindingTargets
    /// `admin` on every object (a rule `*=admin`): checked from this table by `OperationDeclaration.admit`.
    case serverAdmin
}

/// Who answers an operation once it is decoded and admitted.
package enum OperationRoute: Sendable {
    /// `RequestHandler` against the engine (in cluster mode, writes after the stream), with the operation's handler
    /// (`RequestHandler.set`, …), named in the server's handler table (`RequestHandler.perform`): this layer does not
    /// see the server's types.
    case engine
    /// The server's session code: `auth` checks credentials off the loop thread.
    case authentication
    /// The server's user administration (`Server.administer`): passwords hashed off the loop thread,
    /// changes replicated as user changes.
    case administration
    /// The server's sessions (`Server+Presence`): node-local state; the actions a session runs when it ends
    /// are ordinary writes, sent through the same door as a client's.
    case presence
    /// The server's own state, which the engine does not hold (`Server.answerServerState`): its connections
    /// (`clients`, `kill`) and its slow-request log (`slow`). Node-local, never replicated.
    case serverState
    /// The server's store (`Server+Backup`, `Server+Compaction`): this node's database file, copied or compacted off
    /// the request path, answered when done.
    case storage
}

/// Everything the server needs to know about one operation: one row of `OperationTable`.
package struct OperationDeclaration: Sendable {
    /// The wire name (`op`).
    package let name: String
    package let effect: OperationEffect
    package let requirement: OperationRequirement
    /// Whether a connection may send it before logging in (users defined): nothing else is even decoded then.
    package let beforeLogin: Bool
    /// Whether it may carry `atLeastRev` (read-your-writes across cluster nodes).
    package let acceptsAtLeastRev: Bool
    /// The write modifiers it may carry (`WriteModifiers`: conditions, `ttl`, `ephemeral`), decoded into one value
    /// and applied in the write's turn by `RequestHandler`, whatever path the write took to the engine.
    package let modifiers: WriteModifierKinds
    /// Whether a `batch` may hold it: the writes of one object, applied all or nothing with the batch's other parts.
    package let batchable: Bool
    /// Whether it only ever removes what is stored (a delete, an array element, a binding, a user, a session's
    /// actions): taken while the store is past `--max-disk`, which refuses the writes that could add to it
    /// (`StorageStatus.admitsFreeingWrites`).
    package let freesSpace: Bool
    /// Every field it accepts (docs/protocol.md, "Operations"): `op` and `id`, the row's own, then the fields of its
    /// `modifiers` and `atLeastRev` where the flags above accept them. Any other member is `bad_request` naming it
    /// (`RequestDecoder.refusal`).
    package let fields: [FieldDeclaration]
    /// `fields` as bits (`RequestField.bit`): a member is accepted when its bit is here (one AND per request).
    let acceptedFields: UInt64
    /// The bits of the fields that accept `null` (`FieldDeclaration.acceptsNull`): any other `null` is `bad_request`.
    let nullableFields: UInt64
    /// Its `op` label in `kvod_requests_total`.
    let metrics: MetricsOperation
    package let route: OperationRoute
    /// Reads the request's fields (the line is a JSON object whose `op` named this operation).
    let decode: @Sendable (FieldReader) throws(KVOError) -> Request
    /// A well-formed request line, for the documentation and for the tests that walk every operation
    /// (objects named `o`, key path `n`).
    package let example: String

    /// `effect` and `requirement` have no default: every row says whether it writes and what it needs. Most
    /// operations need a login and take no `atLeastRev`, so those two say so only when they differ.
    init(name: String, effect: OperationEffect, requirement: OperationRequirement, beforeLogin: Bool = false,
         acceptsAtLeastRev: Bool = false, modifiers: WriteModifierKinds = [], batchable: Bool = false,
         freesSpace: Bool = false, fields: [FieldDeclaration] = [], metrics: MetricsOperation, route: OperationRoute,
         decode: @escaping @Sendable (FieldReader) throws(KVOError) -> Request, example: String) {
        self.name = name
        self.effect = effect
        self.requirement = requirement
        self.beforeLogin = beforeLogin
        self.acceptsAtLeastRev = acceptsAtLeastRev
        self.modifiers = modifiers
        self.batchable = batchable
        self.freesSpace = freesSpace
        var all: [FieldDeclaration] = [.required(.op, .string), .optional(.id, .scalar)] + fields + modifiers.fields
        if acceptsAtLeastRev { all.append(.optional(.atLeastRev, .integer)) }
        self.fields = all
        acceptedFields = RequestField.mask(all.map(\.field))
        nullableFields = RequestField.mask(all.filter(\.acceptsNull).map(\.field))
        self.metrics = metrics
        self.route = route
        self.decode = decode
        self.example = example
    }

    /// Whether it changes replicated state (`effect == .writes`): replicated in cluster mode.
    @inline(__always)
    package var isWrite: Bool { effect == .writes }

    /// Whether it changes what the store keeps (a write, or a session's actions): refused while the store
    /// cannot take writes (`Server.handleLine`, the one door for the store's health).
    @inline(__always)
    package var isStored: Bool { effect == .writes || effect == .storesSession }

    /// Refuses `access` when the row's requirement is one the table itself checks (`serverAdmin`); the
    /// object-level requirements are checked by the engine as it reaches each object. Every route passes
    /// here: `RequestHandler.handle` (live and replicated engine operations), `Server.administer` and
    /// `Server.applyReplicated` (user administration).
    @inline(__always)
    func admit(_ access: ConnectionAccess) throws(KVOError) {
        if requirement == .serverAdmin { try access.requireServerAdmin(name) }
    }
}

/// The rows, in `ProtocolOperation` order, and the lookup by name.
enum OperationTable {
    static let rows: [OperationDeclaration] = ProtocolOperation.allCases.map(declaration(of:))

    /// The names of at most eight bytes, for `ProtocolOperation(nameText:)` (indexes are `allCases` positions).
    static let shortNames = JSONParser.KeyTable(ProtocolOperation.allCases.map { rows[$0.rawValue].name })

    /// Operations by the length of their name (index), for `ProtocolOperation(named:)`.
    static let byLength: [[ProtocolOperation]] = {
        let longest = ProtocolOperation.allCases.map { rows[$0.rawValue].name.utf8.count }.max() ?? 0
        var table = [[ProtocolOperation]](repeating: [], count: longest + 1)
        for operation in ProtocolOperation.allCases { table[rows[operation.rawValue].name.utf8.count].append(operation) }
        return table
    }()

    /// The table. One `case` per operation and no `default:`, so that a new operation states all of this.
    private static func declaration(of operation: ProtocolOperation) -> OperationDeclaration {
        switch operation {
        case .hello:
            return OperationDeclaration(
                name: "hello", effect: .connection, requirement: .nothing, beforeLogin: true,
                fields: [.optional(.client, .string), .optional(.events, .string, nullMeansAbsent: true)],
                metrics: .hello, route: .engine, decode: RequestDecoder.hello,
                example: #"{"op":"hello","client":"example","events":"compact"}"#)
        case .auth:
            return OperationDeclaration(
                name: "auth", effect: .connection, requirement: .nothing, beforeLogin: true,
                fields: [.optional(.user, .string), .optional(.password, .string), .optional(.token, .string)],
                metrics: .auth, route: .authentication, decode: RequestDecoder.auth,
                example: #"{"op":"auth","user":"alice","password":"secret"}"#)
        case .ping:
            return OperationDeclaration(
                name: "ping", effect: .connection, requirement: .nothing, beforeLogin: true,
                metrics: .ping, route: .engine, decode: { _ throws(KVOError) in .ping },
                example: #"{"op":"ping"}"#)
        case .create:
            return OperationDeclaration(
                name: "create", effect: .writes, requirement: .writeObjects, modifiers: [.conditions, .ttl, .ephemeral],
                batchable: true,
                fields: [.required(.object, .objectID), .optional(.values, .object), .optional(.class, .string)],
                metrics: .create, route: .engine, decode: RequestDecoder.create,
                example: #"{"op":"create","object":"o2","values":{"n":1}}"#)
        case .delete:
            return OperationDeclaration(
                name: "delete", effect: .writes, requirement: .writeObjects, modifiers: .conditions, batchable: true, freesSpace: true,
                fields: [.required(.object, .objectID)],
                metrics: .delete, route: .engine, decode: { reader throws(KVOError) in .delete(object: try reader.objectID()) },
                example: #"{"op":"delete","object":"o"}"#)
        case .get:
            return OperationDeclaration(
                name: "get", effect: .reads, requirement: .readObjects, acceptsAtLeastRev: true,
                fields: [.required(.object, .objectID), .optional(.keyPath, .keyPath)],
                metrics: .get, route: .engine,
                decode: { reader throws(KVOError) in .get(object: try reader.objectID(), keyPath: try reader.optionalKeyPath()) },
                example: #"{"op":"get","object":"o","keyPath":"n"}"#)
        case .set:
            return OperationDeclaration(
                name: "set", effect: .writes, requirement: .writeObjects, modifiers: [.conditions, .ttl],
                batchable: true,
                fields: [.required(.object, .objectID), .required(.keyPath, .keyPath), .required(.value, .any)],
                metrics: .set, route: .engine, decode: RequestDecoder.set,
                example: #"{"op":"set","object":"o","keyPath":"n","value":2}"#)
        case .increment:
            return OperationDeclaration(
                name: "increment", effect: .writes, requirement: .writeObjects, modifiers: .conditions, batchable: true,
                fields: [.required(.object, .objectID), .required(.keyPath, .keyPath), .optional(.by, .number)],
                metrics: .increment, route: .engine, decode: RequestDecoder.increment,
                example: #"{"op":"increment","object":"o","keyPath":"n","by":5}"#)
        case .insert:
            return OperationDeclaration(
                name: "insert", effect: .writes, requirement: .writeObjects, modifiers: .conditions, batchable: true,
                fields: [.required(.object, .objectID), .required(.keyPath, .keyPath), .optional(.value, .any), .optional(.values, .array),
                         .optional(.index, .integer), .optional(.indexes, .array)],
                metrics: .insert, route: .engine, decode: RequestDecoder.insert,
                example: #"{"op":"insert","object":"o","keyPath":"list","index":0,"value":"x"}"#)
        case .remove:
            return OperationDeclaration(
                name: "remove", effect: .writes, requirement: .writeObjects, modifiers: .conditions, batchable: true, freesSpace: true,
                fields: [.required(.object, .objectID), .required(.keyPath, .keyPath), .optional(.index, .integer), .optional(.indexes, .array)],
                metrics: .remove, route: .engine, decode: RequestDecoder.remove,
                example: #"{"op":"remove","object":"o","keyPath":"list","index":0}"#)
        case .replace:
            return OperationDeclaration(
                name: "replace", effect: .writes, requirement: .writeObjects, modifiers: .conditions, batchable: true,
                fields: [.required(.object, .objectID), .required(.keyPath, .keyPath), .optional(.value, .any), .optional(.values, .array),
                         .optional(.index, .integer), .optional(.indexes, .array)],
                metrics: .replace, route: .engine, decode: RequestDecoder.replace,
                example: #"{"op":"replace","object":"o","keyPath":"list","index":0,"value":"y"}"#)
        case .batch:
            return OperationDeclaration(
                name: "batch", effect: .writes, requirement: .writeObjects,
                fields: [.required(.ops, .array)],
                metrics: .batch, route: .engine, decode: RequestDecoder.batch,
                example: #"{"op":"batch","ops":[{"op":"set","object":"o","keyPath":"n","value":3},{"op":"create","object":"o3"}]}"#)
        case .observe:
            return OperationDeclaration(
                name: "observe", effect: .reads, requirement: .readObjects, acceptsAtLeastRev: true,
                fields: [.optional(.object, .objectID), .optional(.pattern, .pattern), .optional(.keyPath, .keyPath),
                         .optional(.where, .expression), .optional(.options, .array), .optional(.sinceRev, .integer)],
                metrics: .observe, route: .engine, decode: RequestDecoder.observe,
                example: #"{"op":"observe","object":"o","keyPath":"n","options":["new","old"]}"#)
        case .unobserve:
            return OperationDeclaration(
                name: "unobserve", effect: .connection, requirement: .nothing,
                fields: [.required(.sub, .integer)],
                metrics: .unobserve, route: .engine, decode: RequestDecoder.unobserve,
                example: #"{"op":"unobserve","sub":1}"#)
        case .list:
            return OperationDeclaration(
                name: "list", effect: .reads, requirement: .readObjects, acceptsAtLeastRev: true,
                fields: [.optional(.limit, .integer), .optional(.after, .string)],
                metrics: .list, route: .engine,
                decode: { reader throws(KVOError) in
                    .list(limit: try reader.optionalPositiveInteger("limit"), after: try reader.optionalString("after"))
                },
                example: #"{"op":"list","limit":10}"#)
        case .info:
            return OperationDeclaration(
                name: "info", effect: .reads, requirement: .readObjects, acceptsAtLeastRev: true,
                fields: [.required(.object, .objectID)],
                metrics: .info, route: .engine, decode: { reader throws(KVOError) in .info(object: try reader.objectID()) },
                example: #"{"op":"info","object":"o"}"#)
        case .defineClass:
            return OperationDeclaration(
                name: "defineClass", effect: .writes, requirement: .serverAdmin,
                fields: [.required(.class, .object)],
                metrics: .defineClass, route: .engine, decode: RequestDecoder.defineClass,
                example: #"{"op":"defineClass","class":{"name":"Counter","properties":{"n":{"type":"integer"}}}}"#)
        case .classes:
            return OperationDeclaration(
                name: "classes", effect: .reads, requirement: .nothing,
                metrics: .classes, route: .engine, decode: { _ throws(KVOError) in .classes },
                example: #"{"op":"classes"}"#)
        case .bind:
            return OperationDeclaration(
                name: "bind", effect: .writes, requirement: .adminOnBindingTargets,
                fields: [.required(.from, .object), .required(.to, .object), .optional(.filter, .expression), .optional(.convert, .expression),
                         .optional(.now, .boolean)],
                metrics: .bind, route: .engine,
                decode: { reader throws(KVOError) in try RequestDecoder.binding(.bind, reader) },
                example: #"{"op":"bind","from":{"object":"o","keyPath":"n"},"to":{"object":"o","keyPath":"m"}}"#)
        case .combineLatest:
            return OperationDeclaration(
                name: "combineLatest", effect: .writes, requirement: .adminOnBindingTargets,
                fields: [.required(.sources, .array), .required(.to, .object), .required(.reduce, .expression),
                         .optional(.filter, .expression), .optional(.now, .boolean)],
                metrics: .bind, route: .engine,
                decode: { reader throws(KVOError) in try RequestDecoder.binding(.combineLatest, reader) },
                example: #"{"op":"combineLatest","sources":[{"object":"o","keyPath":"n"},{"object":"o","keyPath":"m"}],"to":{"object":"o","keyPath":"sum"},"reduce":"$0 + $1"}"#)
        case .unbind:
            return OperationDeclaration(
                name: "unbind", effect: .writes, requirement: .adminOnBindingTargets, freesSpace: true,
                fields: [.required(.binding, .integer)],
                metrics: .unbind, route: .engine, decode: RequestDecoder.unbind,
                example: #"{"op":"unbind","binding":1}"#)
        case .bindings:
            return OperationDeclaration(
                name: "bindings", effect: .reads, requirement: .adminOnBindingTargets,
                metrics: .bindings, route: .engine, decode: { _ throws(KVOError) in .bindings },
                example: #"{"op":"bindings"}"#)
        case .digest:
            return OperationDeclaration(
                name: "digest", effect: .reads, requirement: .serverAdmin,
                metrics: .digest, route: .engine, decode: { _ throws(KVOError) in .digest },
                example: #"{"op":"digest"}"#)
        case .access:
            return OperationDeclaration(
                name: "access", effect: .connection, requirement: .nothing,
                fields: [.optional(.objects, .array)],
                metrics: .access, route: .engine, decode: RequestDecoder.access,
                example: #"{"op":"access","objects":["o"]}"#)
        case .touch:
            return OperationDeclaration(
                // Not in batches: a batch's parts each take its revision, and a touch takes none.
                name: "touch", effect: .writes, requirement: .writeObjects,
                fields: [.required(.object, .objectID)],
                metrics: .touch, route: .engine, decode: RequestDecoder.touch,
                example: #"{"op":"touch","object":"o"}"#)
        case .expire:
            // Sent by the server itself when an object's time to live ends (`Server+Expiry`), as a write any
            // node may submit: only a server admin may send it, and it deletes only what is due.
            return OperationDeclaration(
                name: "expire", effect: .writes, requirement: .serverAdmin, freesSpace: true,
                fields: [.required(.object, .objectID), .required(.changedRev, .integer)],
                metrics: .expire, route: .engine, decode: RequestDecoder.expire,
                example: #"{"op":"expire","object":"o","changedRev":1}"#)
        case .metrics:
            return OperationDeclaration(
                name: "metrics", effect: .reads, requirement: .serverAdmin,
                metrics: .metrics, route: .engine, decode: { _ throws(KVOError) in .metrics },
                example: #"{"op":"metrics"}"#)
        case .status:
            return OperationDeclaration(
                name: "status", effect: .reads, requirement: .serverAdmin,
                metrics: .status, route: .engine, decode: { _ throws(KVOError) in .status },
                example: #"{"op":"status"}"#)
        case .config:
            return OperationDeclaration(
                name: "config", effect: .reads, requirement: .serverAdmin,
                metrics: .config, route: .engine, decode: { _ throws(KVOError) in .configuration },
                example: #"{"op":"config"}"#)
        case .session:
            // Sessions are node-local, so not replicated: the writes they run when they end are (as writes).
            return OperationDeclaration(
                name: "session", effect: .connection, requirement: .nothing,
                fields: [.optional(.resume, .string), .optional(.grace, .seconds)],
                metrics: .session, route: .presence, decode: RequestDecoder.session,
                example: #"{"op":"session","grace":10}"#)
        case .onDisconnect:
            // The write is checked with its registrant's rights when it runs, not now (docs/protocol.md, "Presence").
            return OperationDeclaration(
                name: "onDisconnect", effect: .storesSession, requirement: .nothing,
                fields: [.required(.request, .object)],
                metrics: .onDisconnect, route: .presence, decode: RequestDecoder.onDisconnect,
                example: #"{"op":"onDisconnect","request":{"op":"set","object":"o","keyPath":"n","value":0}}"#)
        case .cancelOnDisconnect:
            return OperationDeclaration(
                name: "cancelOnDisconnect", effect: .storesSession, requirement: .nothing, freesSpace: true,
                fields: [.optional(.action, .integer)],
                metrics: .cancelOnDisconnect, route: .presence,
                decode: { reader throws(KVOError) in .cancelOnDisconnect(action: try reader.optionalRevision("action")) },
                example: #"{"op":"cancelOnDisconnect","action":1}"#)
        case .endSession:
            return OperationDeclaration(
                name: "endSession", effect: .storesSession, requirement: .nothing,
                metrics: .endSession, route: .presence, decode: { _ throws(KVOError) in .endSession },
                example: #"{"op":"endSession"}"#)
        case .slow:
            // Node-local: each node keeps its own log; `reset` empties it after the reply.
            return OperationDeclaration(
                name: "slow", effect: .reads, requirement: .serverAdmin, fields: [.optional(.reset, .boolean)],
                metrics: .slow, route: .serverState,
                decode: { reader throws(KVOError) in .slow(reset: try reader.optionalBool("reset") ?? false) },
                example: #"{"op":"slow"}"#)
        case .clients:
            return OperationDeclaration(
                name: "clients", effect: .reads, requirement: .serverAdmin,
                metrics: .clients, route: .serverState, decode: { _ throws(KVOError) in .clients },
                example: #"{"op":"clients"}"#)
        case .kill:
            // Closes a connection of this node (its observations and session as on any disconnect): nothing replicated.
            return OperationDeclaration(
                name: "kill", effect: .connection, requirement: .serverAdmin, fields: [.required(.connection, .integer)],
                metrics: .kill, route: .serverState, decode: RequestDecoder.kill,
                example: #"{"op":"kill","connection":7}"#)
        case .backup:
            // Node-local, never replicated, not a write: taken while the store refuses writes (a full disk is when
            // a backup is wanted). One at a time (`BackupTransfers`); docs/protocol.md, "Backups over the network".
            return OperationDeclaration(
                name: "backup", effect: .reads, requirement: .serverAdmin,
                fields: [.optional(.offset, .integer)],
                metrics: .backup, route: .storage, decode: RequestDecoder.backup,
                example: #"{"op":"backup"}"#)
        case .compact:
            // Node-local and not a change of state (the same rows, in fewer pages): taken at `--max-disk`, where it is needed.
            return OperationDeclaration(
                name: "compact", effect: .reads, requirement: .serverAdmin,
                metrics: .compact, route: .storage, decode: { _ throws(KVOError) in .compact },
                example: #"{"op":"compact"}"#)
        case .signal:
            // No revision, history or store (docs/protocol.md, "Signals"): `write` on the object, checked by the
            // engine as every write's; rate and size bounded per connection (`Server+Signals`).
            return OperationDeclaration(
                name: "signal", effect: .signals, requirement: .writeObjects,
                fields: [.required(.object, .objectID), .required(.value, .any)],
                metrics: .signal, route: .engine, decode: RequestDecoder.signal,
                example: #"{"op":"signal","object":"o","value":{"x":1,"y":2}}"#)
        case .userAdd:
            return administration("userAdd", fields: [.required(.user, .string), .required(.password, .string), .optional(.rules, .array), .optional(.hashCost, .string)], .writes, example: #"{"op":"userAdd","user":"bob","password":"pw","rules":[{"objects":"bob.*","allow":["read","write"]}]}"#)
        case .userRemove:
            return administration("userRemove", fields: [.required(.user, .string)], .writes, freesSpace: true, example: #"{"op":"userRemove","user":"bob"}"#)
        case .userList:
            return administration("userList", fields: [], .reads, example: #"{"op":"userList"}"#)
        case .userPasswd:
            return administration("userPasswd", fields: [.required(.user, .string), .required(.password, .string), .optional(.hashCost, .string)], .writes, example: #"{"op":"userPasswd","user":"bob","password":"pw2"}"#)
        case .userGrant:
            return administration("userGrant", fields: [.required(.user, .string), .required(.rules, .array)], .writes, example: #"{"op":"userGrant","user":"bob","rules":[{"objects":"shared","allow":["read"]}]}"#)
        case .userRevoke:
            return administration("userRevoke", fields: [.required(.user, .string), .required(.rules, .array)], .writes, example: #"{"op":"userRevoke","user":"bob","rules":[{"objects":"shared","allow":["read"]}]}"#)
        case .tokenCreate:
            return administration("tokenCreate", fields: [.required(.user, .string)], .writes, example: #"{"op":"tokenCreate","user":"bob"}"#)
        case .tokenRevoke:
            return administration("tokenRevoke", fields: [.required(.user, .string), .required(.token, .string)], .writes, freesSpace: true, example: #"{"op":"tokenRevoke","user":"bob","token":"t1"}"#)
        }
    }

    /// A user administration row: server admins only, answered by `Server.administer`, counted as `admin`.
    /// Its changes are replicated as user changes (`UserChange`), not as request lines.
    private static func administration(_ name: String, fields: [FieldDeclaration], _ effect: OperationEffect,
                                       freesSpace: Bool = false, example: String) -> OperationDeclaration {
        OperationDeclaration(
            name: name, effect: effect, requirement: .serverAdmin, freesSpace: freesSpace, fields: fields,
            metrics: .admin, route: .administration,
            decode: { reader throws(KVOError) in .admin(try AdminRequest.decode(op: name) { reader.fields[$0] }) },
            example: example)
    }
}

extension Request {
    /// The operation this request is an instance of. No `default:`: a new kind of request must name its
    /// operation, and so its row (whether it writes, what it needs).
    package var operation: ProtocolOperation {
        switch self {
        case .hello: .hello
        case .auth: .auth
        case .ping: .ping
        case .create: .create
        case .delete: .delete
        case .get: .get
        case .set: .set
        case .increment: .increment
        case .batch: .batch
        case let .mutateArray(_, _, mutation):
            switch mutation {
            case .insert: .insert
            case .remove: .remove
            case .replace: .replace
            }
        case .observe, .observePattern: .observe
        case .unobserve: .unobserve
        case .list: .list
        case .info: .info
        case .defineClass: .defineClass
        case .classes: .classes
        case let .bind(spec, _):
            switch spec.kind {
            case .bind: .bind
            case .combineLatest: .combineLatest
            }
        case .unbind: .unbind
        case .bindings: .bindings
        case .digest: .digest
        case .access: .access
        case .metrics: .metrics
        case .status: .status
        case .configuration: .config
        case .touch: .touch
        case .expire: .expire
        case let .modified(_, request): request.operation
        case .session: .session
        case .onDisconnect: .onDisconnect
        case .cancelOnDisconnect: .cancelOnDisconnect
        case .endSession: .endSession
        case .slow: .slow
        case .clients: .clients
        case .kill: .kill
        case .backup: .backup
        case .compact: .compact
        case .signal: .signal
        case let .admin(request):
            switch request {
            case .userAdd: .userAdd
            case .userRemove: .userRemove
            case .userList: .userList
            case .userPasswd: .userPasswd
            case .userGrant: .userGrant
            case .userRevoke: .userRevoke
            case .tokenCreate: .tokenCreate
            case .tokenRevoke: .tokenRevoke
            }
        }
    }

    /// Whether the request changes replicated state (its operation's row): in cluster mode it goes
    /// through the stream (docs/design.md, "Cluster").
    @inline(__always)
    var isWrite: Bool { operation.declaration.isWrite }
}
