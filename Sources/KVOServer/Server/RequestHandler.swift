import KVOEngine
import KVOJSON
import KVOModel
import KVOVersion

/// Carries out one decoded request against the engine and shapes its reply.
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

    static let serverName = "kvod"
    /// `KVODVersion.version`: the one place the version is written.
    static let serverVersion = KVODVersion.version
    static let protocolVersion: Int64 = 1

    /// Replaced only when a cluster node installs a snapshot while it serves (`Server.installSnapshotInPlace`).
    var engine: KVOEngine
    /// In cluster mode: this node's place in the cluster (`ClusterStatus`), for `digest`'s reply.
    var clusterStatus: (() -> ClusterStatus)?
    /// What `GET /metrics` serves now (set by the server), for the `metrics` operation.
    var metricsText: (() -> [UInt8])?
    /// The server's users, for `digest` (replicated state in a cluster). Set by the server before it serves.
    var users: UserDirectory?

    init(engine: KVOEngine) {
        self.engine = engine
    }

    /// Carries out `request` for `connection`, with the rights of `access` (the connection's principal:
    /// docs/protocol.md, "Permissions"; a denial is `forbidden` and changes nothing). Its operation's row
    /// admits `access` first (`OperationDeclaration.admit`): live requests and replicated ones pass here. A reply that could
    /// be large is measured against `budget` first and refused with `too_large` when it would not fit
    /// (see `ReplyBudget`). `eventEncoding` is the connection's (after this
    /// request, when it is a `hello` choosing one): `hello` reports it, and an `observe` makes its
    /// observation with it.
    func handle(_ request: Request, from connection: ConnectionID, access: ConnectionAccess,
                budget: ReplyBudget = .unlimited, eventEncoding: EventEncoding = .full,
                notifications: inout [ChangeNotification]) -> Outcome {
        do {
            try request.operation.declaration.admit(access)
            return try perform(request, from: connection, access: access, budget: budget,
                               eventEncoding: eventEncoding,
                               notifications: &notifications)
        } catch {
            return Outcome(reply: .failure(error), order: .afterNotifications)
        }
    }

    private func perform(_ request: Request, from connection: ConnectionID, access: ConnectionAccess,
                         budget: ReplyBudget, eventEncoding: EventEncoding,
                         notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        switch request {
        case .hello:
            return reply([
                ("connection", .int(Int64(connection.rawValue))),
                ("events", .string(eventEncoding.rawValue)),
                ("features", .array(ProtocolFeature.announced.map(JSONValue.string))),
                ("protocol", .int(RequestHandler.protocolVersion)),
                ("server", .string(RequestHandler.serverName)),
                ("version", .string(RequestHandler.serverVersion)),
            ])
        case .auth, .admin, .session, .onDisconnect, .cancelOnDisconnect, .endSession:
            // The server answers these itself (passwords are checked and hashed off the loop thread; sessions are
            // the server's, not the engine's).
            throw KVOError(.badRequest, "answered by the server")
        case let .create(object, values, className):
            let rev = try engine.create(object, values: values, className: className, access: access,
                                        notifications: &notifications)
            return replyRevision(rev)
        case let .delete(object):
            return replyRevision(try engine.delete(object, access: access, notifications: &notifications))
        case let .get(object, keyPath):
            let value = try engine.get(object, keyPath: keyPath, access: access)
            try requireFit(value, budget, "the value of \(keyPath.map { "'\(PrintableText.escaped($0.string, limit: 64))' of " } ?? "")object '\(PrintableText.escaped(object, limit: 64))'")
            var fields: [(String, JSONValue)] = [("changedRev", revision(engine.changedRevision(of: object) ?? 0))]
            // An object with a time to live says when it ends (docs/protocol.md, "Expiry").
            if let expiry = engine.expiry(of: object) { fields.append(("expiresAt", .int(expiry.deadline))) }
            fields.append(("rev", revision(engine.revision)))
            fields.append(("value", value))
            return reply(fields)
        case let .set(object, keyPath, value):
            let rev: UInt64
            switch value {
            case let .text(text) where keyPath.components.count == 1:
                // The request carried the value in canonical form, for a key of the object itself: the engine
                // may keep it as text, and decodes it only where something reads inside it.
                rev = try engine.set(object, keyPath: keyPath, text: text, access: access, notifications: &notifications)
            case let .text(text):
                // A longer path is never held as text: the decoded `set`, with the request's text for the event
                // (no optional value or text wrapper on the way, measured: docs/performance.md, issue 28).
                rev = try engine.set(object, keyPath: keyPath, value: text.value, encoded: text.bytes, access: access,
                                     notifications: &notifications)
            case let .decoded(decoded):
                rev = try engine.set(object, keyPath: keyPath, value: decoded, access: access, notifications: &notifications)
            }
            return replyRevision(rev)
        case let .increment(object, keyPath, by):
            let (rev, value) = try engine.increment(object, keyPath: keyPath, by: by, access: access,
                                                    notifications: &notifications)
            return reply([("rev", revision(rev)), ("value", value)])
        case let .mutateArray(object, keyPath, mutation):
            let rev = try engine.mutateArray(object, keyPath: keyPath, mutation, access: access,
                                             notifications: &notifications)
            return replyRevision(rev)
        case let .observe(object, keyPath, requestedOptions, sinceRev):
            let options = eventEncoding == .compact ? requestedOptions.union(.compactEvents) : requestedOptions
            let sub = try engine.observe(object, keyPath: keyPath, options: options, connection: connection,
                                         sinceRev: sinceRev, access: access, notifications: &notifications)
            if !EventSizeBound.fits(notifications, budget: budget.bytes) {
                // The initial value, resync or replayed history would not fit: no subscription, no event.
                _ = engine.unobserve(sub, connection: connection)
                notifications.removeAll(keepingCapacity: true)
                let what = sinceRev == nil ? "the initial value" : "the resync value or the changes to replay"
                throw budget.refusal(what + " of '\(PrintableText.escaped(keyPath.string, limit: 64))' (nothing was subscribed)")
            }
            return Outcome(reply: .success([("rev", revision(engine.revision)), ("sub", .int(sub))] as ReplyFields),
                           order: .beforeNotifications)
        case let .observePattern(pattern, keyPath, filter, requestedOptions, sinceRev):
            let options = eventEncoding == .compact ? requestedOptions.union(.compactEvents) : requestedOptions
            let sub = try engine.observe(pattern: pattern, keyPath: keyPath, filter: filter, options: options,
                                         connection: connection,
                                         sinceRev: sinceRev, access: access, notifications: &notifications)
            if !EventSizeBound.fits(notifications, budget: budget.bytes) {
                _ = engine.unobserve(sub, connection: connection)
                notifications.removeAll(keepingCapacity: true)
                let what = sinceRev == nil ? "the initial events" : "the resync events or the changes to replay"
                throw budget.refusal(what + " of pattern '\(PrintableText.escaped(pattern.text, limit: 64))' (nothing was subscribed)")
            }
            return Outcome(reply: .success([("rev", revision(engine.revision)), ("sub", .int(sub))] as ReplyFields),
                           order: .beforeNotifications)
        case let .unobserve(subscription):
            return reply([("removed", .bool(engine.unobserve(subscription, connection: connection)))])
        case let .list(limit, after):
            return reply(try listPage(limit: limit, after: after, access: access, budget: budget))
        case let .info(object):
            // Another user's connection ids are shown to server admins only (a connection id names
            // someone else's session); the rest of each observer's line is shown to every reader.
            let showsEveryConnection = access.isServerAdmin
            let observers = try engine.observers(of: object, access: access).map { info -> JSONValue in
                var fields: [String: JSONValue] = [
                    "sub": .int(info.subscription),
                    "options": .array(info.options.names.map(JSONValue.string)),
                ]
                // A pattern observation matching the object: its pattern, and its key path if it has one.
                if !info.keyPath.isEmpty { fields["keyPath"] = .string(info.keyPath) }
                if let pattern = info.pattern { fields["pattern"] = .string(pattern) }
                if let filter = info.filter { fields["where"] = .string(filter) }
                if showsEveryConnection || (info.user != nil && info.user == access.user) {
                    fields["connection"] = .int(Int64(info.connection.rawValue))
                }
                return .object(fields)
            }
            let listing = JSONValue.array(observers)
            try requireFit(listing, budget, "the \(observers.count) observers of '\(PrintableText.escaped(object, limit: 64))'")
            return reply([("observers", listing)])
        case .ping:
            return reply([])
        case let .defineClass(definition):
            return reply([("name", .string(try engine.defineClass(definition)))])
        case .classes:
            let definitions = engine.classDefinitions()
            let listing = JSONValue.array(definitions)
            try requireFit(listing, budget, "the \(definitions.count) class definitions")
            return reply([("classes", listing)])
        case let .bind(spec, now):
            let id = try engine.bind(spec, now: now, creator: connection, access: access, notifications: &notifications)
            return reply([("binding", .int(Int64(id))), ("rev", revision(engine.revision))])
        case let .unbind(binding):
            return reply([("removed", .bool(try engine.unbind(binding, access: access)))])
        case let .batch(parts):
            return try performBatch(parts, from: connection, access: access, budget: budget, eventEncoding: eventEncoding,
                                    notifications: &notifications)
        case let .modified(modifiers, write):
            return try performModified(write, modifiers, from: connection, access: access, budget: budget,
                                       eventEncoding: eventEncoding, notifications: &notifications)
        case let .touch(object):
            let expiry = try engine.touch(object, access: access)
            // The deadline is the object's (whether it has a ttl, and which): only for a caller that may read it.
            guard access.allows(.read, on: object) else { return reply([("rev", revision(engine.revision))]) }
            return reply([("expiresAt", expiry.map { .int($0.deadline) } ?? .null), ("rev", revision(engine.revision))])
        case let .expire(object, changedRev):
            return replyRevision(try engine.expire(object, ifRev: changedRev, notifications: &notifications))
        case .digest:
            var fields: [(String, JSONValue)] = [("digest", .string(StateDigest.of(engine, users: users)))]
            if let status = clusterStatus?() {
                fields.insert(("applied", .int(Int64(status.applied))), at: 0)
                if let snapshot = status.snapshot { fields.insert(("bootstrapSnapshot", .int(Int64(snapshot))), at: 1) }
                fields.append(("node", .string(status.node)))
                fields.append(("chain", .string(status.chain)))
                fields.append(("integrity", .string(status.health ?? "applying")))
                fields.append(("peers", .array(status.peers.map { peer in
                    var members: [String: JSONValue] = [
                        "node": .string(peer.node), "applied": .int(Int64(bitPattern: peer.sequence)), "chain": .string(peer.hash),
                        "agrees": peer.agrees.map(JSONValue.bool) ?? .null,
                    ]
                    if let revision = peer.revision { members["rev"] = .int(Int64(bitPattern: revision)) }
                    return .object(members)
                })))
            }
            fields.append(("objects", .int(Int64(engine.objectCount))))
            fields.append(("rev", revision(engine.revision)))
            return reply(fields)
        case .metrics:
            return reply([("text", .string(String(decoding: metricsText?() ?? [], as: UTF8.self)))])
        case let .access(objects):
            // Only the caller's own rules, applied: what it would learn by trying, without trying.
            var rights: [String: JSONValue] = [:]
            for object in objects { rights[object] = .array(access.permissions(on: object).nameList.map(JSONValue.string)) }
            return reply([("anywhere", .array(access.permissionsAnywhere.nameList.map(JSONValue.string))),
                          ("rights", .object(rights)), ("serverAdmin", .bool(access.isServerAdmin)),
                          ("user", access.user.map(JSONValue.string) ?? .null)])
        case .bindings:
            let bindings = engine.bindingListings(access: access)
            let listing = JSONValue.array(bindings)
            try requireFit(listing, budget, "the \(bindings.count) bindings")
            return reply([("bindings", listing)])
        }
    }

    /// The one door for a write's modifiers (`WriteModifiers`), whatever path brought the write (a live request, a
    /// replicated entry, a batch part, a session's action, the server's own write): its conditions checked on the
    /// write's object in this turn, then the write, then its time to live set on that object in the same turn. An
    /// ephemeral object joins its session in the server's write path (`Server.applyWrite`), once this succeeded.
    private func performModified(_ write: Request, _ modifiers: WriteModifiers, from connection: ConnectionID,
                                 access: ConnectionAccess, budget: ReplyBudget, eventEncoding: EventEncoding,
                                 notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        guard let object = write.writtenObject else { throw KVOError(.badRequest, "write modifiers go with writes of one object") }
        if let conditions = modifiers.conditions {
            do {
                try engine.check(conditions, on: object, access: access)
            } catch where error.code == .conflict {
                throw Self.fitted(error, budget)
            }
        }
        let outcome = try perform(write, from: connection, access: access, budget: budget, eventEncoding: eventEncoding,
                                  notifications: &notifications)
        if let ttl = modifiers.ttl { try engine.setTTL(object, milliseconds: ttl) }
        return outcome
    }

    /// `batch`: every part performed as a request of its own would be (admitted by its row, its conditions
    /// checked in turn, so each sees the parts before it), inside the engine's batch; the first refusal undoes
    /// them all and is the reply, with `part` (its index) in its details. The reply: the batch's revision and
    /// each part's own reply without its `rev` (`{}` for most, `{"value":…}` for an `increment`).
    private func performBatch(_ parts: [Request], from connection: ConnectionID, access: ConnectionAccess,
                              budget: ReplyBudget, eventEncoding: EventEncoding,
                              notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        try engine.beginBatch()
        var results: [JSONValue] = []
        results.reserveCapacity(parts.count)
        for (index, part) in parts.enumerated() {
            do throws(KVOError) {
                try part.operation.declaration.admit(access)
                let outcome = try perform(part, from: connection, access: access, budget: budget,
                                          eventEncoding: eventEncoding, notifications: &notifications)
                var fields: [String: JSONValue] = [:]
                if case let .success(reply) = outcome.reply {
                    for (name, value) in reply where name != "rev" { fields[name] = value }
                }
                results.append(.object(fields))
            } catch {
                engine.abortBatch()
                var details = error.details
                details["part"] = .int(Int64(index))
                throw KVOError(error.code, "part \(index) (\(part.operation.name)): \(error.message)", details: details)
            }
        }
        let rev = engine.commitBatch(notifications: &notifications)
        return reply([("results", .array(results)), ("rev", revision(rev))])
    }

    /// A `conflict` whose current `value` would not fit in `budget` (an `ifEquals` on a key path holding
    /// megabytes) without that value: `valueTooLarge: true` instead, as a `get` of it would be `too_large`.
    /// The reply stays as small as the request's own error.
    private static func fitted(_ conflict: KVOError, _ budget: ReplyBudget) -> KVOError {
        // 1 KiB kept for the message and the other details.
        guard let value = conflict.details["value"], JSONSizeBound.of(value, limit: budget.bytes - 1024) == nil else { return conflict }
        var details = conflict.details
        details["value"] = nil
        details["valueTooLarge"] = true
        return KVOError(.conflict, conflict.message + " (the current value is too large for this reply)", details: details)
    }

    /// Refuses with `too_large` when `value` would not fit in `budget` (measured with an early stop,
    /// never encoded).
    private func requireFit(_ value: JSONValue, _ budget: ReplyBudget, _ what: @autoclosure () -> String) throws(KVOError) {
        guard JSONSizeBound.of(value, limit: budget.bytes) == nil else { return }
        throw budget.refusal(what())
    }

    /// One page of `list`: the ids after `after` in sorted order, at most `limit` of them and as many
    /// as fit in `budget`; `more` says whether ids remain after the last one (the next `after`).
    /// Without `limit` the whole list must fit, or the reply is `too_large` (a client that does not
    /// page must not get a silently shortened list).
    ///
    /// A restricted connection sees only ids it may read: unreadable ids are skipped as the page is
    /// filled, each costing one match against the user's compiled rules (not through the connection's
    /// cache, which a long listing would only flush), so a page costs its own ids plus the unreadable
    /// ids between them. For such a connection `more` depends on readable ids only (the read rule):
    /// true when the page is full or was cut, so the next page may be empty; whether unreadable ids
    /// follow is never told. The total number of objects is never mentioned to a restricted connection.
    private func listPage(limit: Int?, after: String?, access: ConnectionAccess,
                          budget: ReplyBudget) throws(KVOError) -> [(String, JSONValue)] {
        // O(log n) to find the start, O(1) per id: a page never sorts or copies the whole id list.
        var ids = engine.objectIDs(after: after)
        let pageLimit = limit ?? Int.max
        var page: [JSONValue] = []
        if let limit { page.reserveCapacity(min(limit, engine.objectCount)) }
        var bytes = 16  // ",\"more\":false" and the brackets
        var cut = false
        let policy: AccessPolicy? = access.isUnrestricted ? nil : access.principal.policy
        while page.count < pageLimit, let id = ids.next() {
            if let policy, !policy.allows(.read, on: id) { continue }
            bytes += 1  // the comma
            guard JSONSizeBound.addString(id, to: &bytes, limit: budget.bytes) else {
                cut = true
                break
            }
            page.append(.string(id))
        }
        if cut && (limit == nil || page.isEmpty) {
            if limit != nil { throw budget.refusal("the next object id") }
            let what = after == nil && policy == nil ? "the list of \(engine.objectCount) objects"
                : after == nil ? "the list of objects" : "the list of objects after the given id"
            throw budget.refusal(what + " (page it with 'limit' and 'after')")
        }
        let more = policy == nil ? ids.hasNext : page.count == pageLimit
        return [("more", .bool(cut || more)), ("objects", .array(page))]
    }

    private func reply(_ fields: [(String, JSONValue)]) -> Outcome {
        Outcome(reply: .success(ReplyFields(fields)), order: .afterNotifications)
    }

    /// The reply to a write: `{"rev":R}`, held as the number (`ReplyFields.revision`).
    private func replyRevision(_ rev: UInt64) -> Outcome {
        Outcome(reply: .success(.revision(rev)), order: .afterNotifications)
    }

    private func revision(_ rev: UInt64) -> JSONValue {
        .int(Int64(rev))
    }
}
