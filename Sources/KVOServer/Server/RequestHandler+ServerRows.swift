import KVOEngine
import KVOJSON
import KVOModel

// The handlers of the rows about the server and the connection rather than one object (`OperationRoute.engine`,
// named in `RequestHandler.handler(of:)`): hello, ping, defineClass, classes, bind and combineLatest, unbind,
// bindings, digest, metrics, status, config and access. Loop thread only.

extension RequestHandler {
    static func hello(_ handler: RequestHandler, _ request: Request, _ call: Call,
                      _ notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        guard case .hello = request else { misrouted(request, #function) }
        return reply([
            ("connection", .int(Int64(call.connection.rawValue))),
            ("events", .string(call.eventEncoding.rawValue)),
            ("features", .array(ProtocolFeature.announced.map(JSONValue.string))),
            ("protocol", .int(RequestHandler.protocolVersion)),
            ("server", .string(RequestHandler.serverName)),
            ("version", .string(RequestHandler.serverVersion)),
        ])
    }

    static func ping(_ handler: RequestHandler, _ request: Request, _ call: Call,
                     _ notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        guard case .ping = request else { misrouted(request, #function) }
        return reply([])
    }

    static func defineClass(_ handler: RequestHandler, _ request: Request, _ call: Call,
                            _ notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        guard case let .defineClass(definition) = request else { misrouted(request, #function) }
        return reply([("name", .string(try handler.engine.defineClass(definition)))])
    }

    static func classes(_ handler: RequestHandler, _ request: Request, _ call: Call,
                        _ notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        guard case .classes = request else { misrouted(request, #function) }
        let definitions = handler.engine.classDefinitions()
        let listing = JSONValue.array(definitions)
        try requireFit(listing, call.budget, "the \(definitions.count) class definitions")
        return reply([("classes", listing)])
    }

    /// `bind` and `combineLatest`.
    static func bind(_ handler: RequestHandler, _ request: Request, _ call: Call,
                     _ notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        guard case let .bind(spec, now) = request else { misrouted(request, #function) }
        let engine = handler.engine
        let id = try engine.bind(spec, now: now, creator: call.connection, access: call.access, notifications: &notifications)
        return reply([("binding", .int(Int64(id))), ("rev", revision(engine.revision))])
    }

    static func unbind(_ handler: RequestHandler, _ request: Request, _ call: Call,
                       _ notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        guard case let .unbind(binding) = request else { misrouted(request, #function) }
        return reply([("removed", .bool(try handler.engine.unbind(binding, access: call.access)))])
    }

    static func bindings(_ handler: RequestHandler, _ request: Request, _ call: Call,
                         _ notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        guard case .bindings = request else { misrouted(request, #function) }
        let bindings = handler.engine.bindingListings(access: call.access)
        let listing = JSONValue.array(bindings)
        try requireFit(listing, call.budget, "the \(bindings.count) bindings")
        return reply([("bindings", listing)])
    }

    static func digest(_ handler: RequestHandler, _ request: Request, _ call: Call,
                       _ notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        guard case .digest = request else { misrouted(request, #function) }
        let engine = handler.engine
        var fields: [(String, JSONValue)] = [("digest", .string(StateDigest.of(engine, users: handler.users, sessions: handler.replicatedSessions?() ?? [])))]
        if let status = handler.clusterStatus?() {
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
    }

    static func metrics(_ handler: RequestHandler, _ request: Request, _ call: Call,
                        _ notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        guard case .metrics = request else { misrouted(request, #function) }
        return reply([("text", .string(String(decoding: handler.metricsText?() ?? [], as: UTF8.self)))])
    }

    /// The server at a glance (`Server.statusReport()`).
    static func status(_ handler: RequestHandler, _ request: Request, _ call: Call,
                       _ notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        guard case .status = request else { misrouted(request, #function) }
        return reply(handler.statusReport?() ?? [])
    }

    /// Every setting in force and where it came from (`Server.configurationReport()`).
    static func config(_ handler: RequestHandler, _ request: Request, _ call: Call,
                       _ notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        guard case .configuration = request else { misrouted(request, #function) }
        return reply(handler.configurationReport?() ?? [("settings", .array([]))])
    }

    /// Only the caller's own rules, applied: what it would learn by trying, without trying.
    static func access(_ handler: RequestHandler, _ request: Request, _ call: Call,
                       _ notifications: inout [ChangeNotification]) throws(KVOError) -> Outcome {
        guard case let .access(objects) = request else { misrouted(request, #function) }
        let access = call.access
        var rights: [String: JSONValue] = [:]
        for object in objects { rights[object] = .array(access.permissions(on: object).nameList.map(JSONValue.string)) }
        return reply([("anywhere", .array(access.permissionsAnywhere.nameList.map(JSONValue.string))),
                      ("rights", .object(rights)), ("serverAdmin", .bool(access.isServerAdmin)),
                      ("user", access.user.map(JSONValue.string) ?? .null)])
    }
}
