import KVOJSON

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
        var reply: Result<[(String, JSONValue)], KVOError>
        var order: ReplyOrder
    }

    static let serverName = "kvod"
    static let serverVersion = "0.1.0"
    static let protocolVersion: Int64 = 1

    let engine: KVOEngine

    init(engine: KVOEngine) {
        self.engine = engine
    }

    func handle(_ request: Request, from connection: ConnectionID,
                notifications: inout [ChangeNotification]) -> Outcome {
        do {
            return try perform(request, from: connection, notifications: &notifications)
        } catch {
            return Outcome(reply: .failure(error), order: .afterNotifications)
        }
    }

    private func perform(_ request: Request, from connection: ConnectionID,
                         notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        switch request {
        case .hello:
            return reply([
                ("connection", .int(Int64(connection.rawValue))),
                ("protocol", .int(RequestHandler.protocolVersion)),
                ("server", .string(RequestHandler.serverName)),
                ("version", .string(RequestHandler.serverVersion)),
            ])
        case let .create(object, values, className):
            let rev = try engine.create(object, values: values, className: className, notifications: &notifications)
            return reply([("rev", revision(rev))])
        case let .delete(object):
            return reply([("rev", revision(try engine.delete(object, notifications: &notifications)))])
        case let .get(object, keyPath):
            let value = try engine.get(object, keyPath: keyPath)
            return reply([("rev", revision(engine.revision)), ("value", value)])
        case let .set(object, keyPath, value):
            let rev = try engine.set(object, keyPath: keyPath, value: value, notifications: &notifications)
            return reply([("rev", revision(rev))])
        case let .mutateArray(object, keyPath, mutation):
            let rev = try engine.mutateArray(object, keyPath: keyPath, mutation, notifications: &notifications)
            return reply([("rev", revision(rev))])
        case let .observe(object, keyPath, options, sinceRev):
            let sub = try engine.observe(object, keyPath: keyPath, options: options, connection: connection,
                                         sinceRev: sinceRev, notifications: &notifications)
            return Outcome(reply: .success([("rev", revision(engine.revision)), ("sub", .int(sub))]),
                           order: .beforeNotifications)
        case let .unobserve(subscription):
            return reply([("removed", .bool(engine.unobserve(subscription, connection: connection)))])
        case .list:
            return reply([("objects", .array(engine.objectIDs().map(JSONValue.string)))])
        case let .info(object):
            let observers = try engine.observers(of: object).map { info -> JSONValue in
                .object([
                    "sub": .int(info.subscription),
                    "keyPath": .string(info.keyPath),
                    "options": .array(info.options.names.map(JSONValue.string)),
                    "connection": .int(Int64(info.connection.rawValue)),
                ])
            }
            return reply([("observers", .array(observers))])
        case .ping:
            return reply([])
        case let .defineClass(definition):
            return reply([("name", .string(try engine.defineClass(definition)))])
        case .classes:
            return reply([("classes", .array(engine.classDefinitions()))])
        case let .bind(spec, now):
            let id = try engine.bind(spec, now: now, creator: connection, notifications: &notifications)
            return reply([("binding", .int(Int64(id))), ("rev", revision(engine.revision))])
        case let .unbind(binding):
            return reply([("removed", .bool(engine.unbind(binding)))])
        case .bindings:
            return reply([("bindings", .array(engine.bindingListings()))])
        }
    }

    private func reply(_ fields: [(String, JSONValue)]) -> Outcome {
        Outcome(reply: .success(fields), order: .afterNotifications)
    }

    private func revision(_ rev: UInt64) -> JSONValue {
        .int(Int64(rev))
    }
}
