import KVOEngine
import KVOJSON
import KVOModel

// The handlers of the observation and listing rows (`OperationRoute.engine`, named in `RequestHandler.handler(of:)`):
// observe (of an object or of a pattern), unobserve, list and info. Loop thread only.

extension RequestHandler {
    /// `observe` of an object, or of a pattern (`observePattern`, the same row): the reply goes before the initial
    /// events; an initial value, resync or replayed history that would not fit in `call.budget` subscribes nothing.
    static func observe(_ handler: RequestHandler, _ request: Request, _ call: Call,
                        _ notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        let engine = handler.engine
        switch request {
        case let .observe(object, keyPath, requestedOptions, sinceRev):
            let options = call.eventEncoding == .compact ? requestedOptions.union(.compactEvents) : requestedOptions
            let sub = try engine.observe(object, keyPath: keyPath, options: options, connection: call.connection,
                                         sinceRev: sinceRev, access: call.access, notifications: &notifications)
            return try subscribed(sub, handler, call, &notifications,
                                  (sinceRev == nil ? "the initial value" : "the resync value or the changes to replay")
                                      + " of '\(PrintableText.escaped(keyPath.string, limit: 64))'")
        case let .observePattern(pattern, keyPath, filter, requestedOptions, sinceRev):
            let options = call.eventEncoding == .compact ? requestedOptions.union(.compactEvents) : requestedOptions
            let sub = try engine.observe(pattern: pattern, keyPath: keyPath, filter: filter, options: options,
                                         connection: call.connection, sinceRev: sinceRev, access: call.access,
                                         notifications: &notifications)
            return try subscribed(sub, handler, call, &notifications,
                                  (sinceRev == nil ? "the initial events" : "the resync events or the changes to replay")
                                      + " of pattern '\(PrintableText.escaped(pattern.text, limit: 64))'")
        default:
            misrouted(request, #function)
        }
    }

    /// The reply to an `observe` that made `sub`, or, when its initial value, resync or replayed history (`what`)
    /// would not fit in the call's budget, its refusal: no subscription, no event.
    private static func subscribed(_ sub: SubscriptionID, _ handler: RequestHandler, _ call: Call,
                                   _ notifications: inout [ChangeNotification],
                                   _ what: @autoclosure () -> String) throws(KVOError) -> Outcome {
        if !EventSizeBound.fits(notifications, budget: call.budget.bytes) {
            _ = handler.engine.unobserve(sub, connection: call.connection)
            notifications.removeAll(keepingCapacity: true)
            throw call.budget.refusal(what() + " (nothing was subscribed)")
        }
        return Outcome(reply: .success([("rev", revision(handler.engine.revision)), ("sub", .int(sub))] as ReplyFields),
                       order: .beforeNotifications)
    }

    static func unobserve(_ handler: RequestHandler, _ request: Request, _ call: Call,
                          _ notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        guard case let .unobserve(subscription) = request else { misrouted(request, #function) }
        return reply([("removed", .bool(handler.engine.unobserve(subscription, connection: call.connection)))])
    }

    static func list(_ handler: RequestHandler, _ request: Request, _ call: Call,
                     _ notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        guard case let .list(limit, after) = request else { misrouted(request, #function) }
        return reply(try handler.listPage(limit: limit, after: after, access: call.access, budget: call.budget))
    }

    static func info(_ handler: RequestHandler, _ request: Request, _ call: Call,
                     _ notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        guard case let .info(object) = request else { misrouted(request, #function) }
        let access = call.access
        // Another user's connection ids are shown to server admins only (a connection id names
        // someone else's session); the rest of each observer's line is shown to every reader.
        let showsEveryConnection = access.isServerAdmin
        let observers = try handler.engine.observers(of: object, access: access).map { info -> JSONValue in
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
        try requireFit(listing, call.budget, "the \(observers.count) observers of '\(PrintableText.escaped(object, limit: 64))'")
        return reply([("observers", listing)])
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
    func listPage(limit: Int?, after: String?, access: ConnectionAccess,
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
}
