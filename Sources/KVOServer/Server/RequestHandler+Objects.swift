import KVOEngine
import KVOJSON
import KVOModel

// The handlers of the rows that write and read objects (`OperationRoute.engine`, named in
// `RequestHandler.handler(of:)`): create, delete, get, set, increment, insert/remove/replace, touch, expire and batch. Each
// takes the request its row decoded and the call (`RequestHandler.Call`). Loop thread only.

extension RequestHandler {
    static func create(_ handler: RequestHandler, _ request: Request, _ call: Call,
                       _ notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        guard case let .create(object, values, className) = request else { misrouted(request, #function) }
        return replyRevision(try handler.engine.create(object, values: values, className: className, access: call.access,
                                                       notifications: &notifications))
    }

    static func delete(_ handler: RequestHandler, _ request: Request, _ call: Call,
                       _ notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        guard case let .delete(object) = request else { misrouted(request, #function) }
        return replyRevision(try handler.engine.delete(object, access: call.access, notifications: &notifications))
    }

    static func get(_ handler: RequestHandler, _ request: Request, _ call: Call,
                    _ notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        guard case let .get(object, keyPath) = request else { misrouted(request, #function) }
        let engine = handler.engine
        let value = try engine.get(object, keyPath: keyPath, access: call.access)
        try requireFit(value, call.budget, "the value of \(keyPath.map { "'\(PrintableText.escaped($0.string, limit: 64))' of " } ?? "")object '\(PrintableText.escaped(object, limit: 64))'")
        var fields: [(String, JSONValue)] = [("changedRev", revision(engine.changedRevision(of: object) ?? 0))]
        // An object with a time to live says when it ends (docs/protocol.md, "Expiry").
        if let expiry = engine.expiry(of: object) { fields.append(("expiresAt", .int(expiry.deadline))) }
        fields.append(("rev", revision(engine.revision)))
        fields.append(("value", value))
        return reply(fields)
    }

    static func set(_ handler: RequestHandler, _ request: Request, _ call: Call,
                    _ notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        guard case let .set(object, keyPath, value) = request else { misrouted(request, #function) }
        let engine = handler.engine
        let rev: UInt64
        switch value {
        case let .text(text) where keyPath.components.count == 1:
            // The request carried the value in canonical form, for a key of the object itself: the engine
            // may keep it as text, and decodes it only where something reads inside it.
            rev = try engine.set(object, keyPath: keyPath, text: text, access: call.access, notifications: &notifications)
        case let .text(text):
            // A longer path is never held as text: the decoded `set`, with the request's text for the event
            // (no optional value or text wrapper on the way, measured: docs/performance.md, issue 28).
            rev = try engine.set(object, keyPath: keyPath, value: text.value, encoded: text.bytes, access: call.access,
                                 notifications: &notifications)
        case let .decoded(decoded):
            rev = try engine.set(object, keyPath: keyPath, value: decoded, access: call.access, notifications: &notifications)
        }
        return replyRevision(rev)
    }

    static func increment(_ handler: RequestHandler, _ request: Request, _ call: Call,
                          _ notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        guard case let .increment(object, keyPath, by) = request else { misrouted(request, #function) }
        let (rev, value) = try handler.engine.increment(object, keyPath: keyPath, by: by, access: call.access,
                                                        notifications: &notifications)
        return reply([("rev", revision(rev)), ("value", value)])
    }

    /// `insert`, `remove` and `replace`.
    static func mutateArray(_ handler: RequestHandler, _ request: Request, _ call: Call,
                            _ notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        guard case let .mutateArray(object, keyPath, mutation) = request else { misrouted(request, #function) }
        return replyRevision(try handler.engine.mutateArray(object, keyPath: keyPath, mutation, access: call.access,
                                                            notifications: &notifications))
    }

    static func touch(_ handler: RequestHandler, _ request: Request, _ call: Call,
                      _ notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        guard case let .touch(object) = request else { misrouted(request, #function) }
        let engine = handler.engine
        let expiry = try engine.touch(object, access: call.access)
        // The deadline is the object's (whether it has a ttl, and which): only for a caller that may read it.
        guard call.access.allows(.read, on: object) else { return reply([("rev", revision(engine.revision))]) }
        return reply([("expiresAt", expiry.map { .int($0.deadline) } ?? .null), ("rev", revision(engine.revision))])
    }

    /// `signal`: the payload to the object's observers (`KVOEngine.signal`, which checks `write` as every write does);
    /// the reply carries nothing (not how many heard it: a writer who may not read the object learns nothing of it).
    static func signal(_ handler: RequestHandler, _ request: Request, _ call: Call,
                       _ notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        guard case let .signal(object, payload) = request else { misrouted(request, #function) }
        try handler.engine.signal(object, payload: payload.canonicalText, access: call.access, notifications: &notifications)
        return reply([])
    }

    static func expire(_ handler: RequestHandler, _ request: Request, _ call: Call,
                       _ notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        guard case let .expire(object, changedRev) = request else { misrouted(request, #function) }
        return replyRevision(try handler.engine.expire(object, ifRev: changedRev, notifications: &notifications))
    }

    /// `batch`: every part performed as a request of its own would be (admitted by its row, its modifiers applied in
    /// turn, so each sees the parts before it), inside the engine's batch; the first refusal undoes them all and is
    /// the reply, with `part` (its index) in its details. The reply: the batch's revision and each part's own reply
    /// without its `rev` (`{}` for most, `{"value":…}` for an `increment`).
    static func batch(_ handler: RequestHandler, _ request: Request, _ call: Call,
                      _ notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        guard case let .batch(parts) = request else { misrouted(request, #function) }
        let engine = handler.engine
        try engine.beginBatch()
        var results: [JSONValue] = []
        results.reserveCapacity(parts.count)
        for (index, part) in parts.enumerated() {
            do throws(KVOError) {
                let operation = part.operation
                try operation.declaration.admit(call.access)
                let outcome = try handler.perform(part, operation, call, &notifications)
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
}
