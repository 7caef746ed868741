import KVOJSON

/// Array element positions for `insert`, `remove` and `replace` (distinct, non-negative).
public typealias ArrayIndexes = [Int]

extension KVOClient {
    // MARK: - Session

    /// What `hello` answers.
    public struct ServerHello: Sendable, Equatable {
        /// `"kvod"`.
        public let server: String
        /// The server's version.
        public let version: String
        /// The protocol version (1).
        public let protocolVersion: Int64
        /// This connection's id on the server.
        public let connection: Int64
        /// The protocol features the server announces (sorted; empty from a server that announces none).
        public let features: [String]
    }

    /// Sends `hello` (the client already did on connecting; this asks again).
    public func hello() async throws -> ServerHello {
        let reply = try await request("hello", ["client": .string(configuration.clientName)])
        return ServerHello(server: reply["server"]?.stringValue ?? "", version: reply["version"]?.stringValue ?? "",
                           protocolVersion: reply["protocol"]?.intValue ?? 0, connection: reply["connection"]?.intValue ?? 0,
                           features: reply["features"]?.arrayValue?.compactMap(\.stringValue) ?? [])
    }

    /// Round trip to the server.
    public func ping() async throws {
        _ = try await request("ping")
    }

    // MARK: - Objects

    /// Creates `object` with `values` (an `Encodable` that encodes as a JSON object), optionally of
    /// `class`, and with `ttl` a time to live: the server deletes it once `ttl` passes without a write to it
    /// or a `touch` (its observers get `sourceDeleted` with `Change.cause` `"expired"`). Returns the new
    /// revision. `exists` if present. `ephemeral`: the object is deleted when this client's session ends
    /// (`startSession`; docs/protocol.md, "Presence"), refused without one.
    @discardableResult
    public func create(_ object: String, values: some Encodable & Sendable = [String: JSONValue](), class className: String? = nil,
                       ttl: Duration? = nil, ephemeral: Bool = false, if conditions: [WriteCondition] = []) async throws -> Int64 {
        try await write(.create(object, values: values, class: className, ttl: ttl, ephemeral: ephemeral, if: conditions))
    }

    /// Starts `object`'s time to live again from now without writing a value; returns when it now expires (ms
    /// since 1970; nil for an object without a ttl, and for a user who may write but not read the object, to whom
    /// the server does not tell the deadline) and the current revision. `not_found` if missing.
    @discardableResult
    public func touch(_ object: String) async throws -> (expiresAt: Int64?, rev: Int64) {
        let reply = try await request("touch", ["object": .string(object)])
        return (reply["expiresAt"]?.intValue, reply["rev"]?.intValue ?? 0)
    }

    /// Sends `payload` to the observers of `object` (docs/protocol.md, "Signals"): each gets a change of reason
    /// `.signal` whose `rawNew` is the payload. Nothing is stored and no revision is taken. Needs `write` on the object;
    /// `not_found` when it does not exist, `too_large` past 64 KiB of payload, `rate_limited` past the connection's
    /// rate (100 at once, then 100 a second).
    public func signal(_ object: String, _ payload: some Encodable & Sendable) async throws {
        _ = try await request("signal", ["object": .string(object), "value": try ValueCoding.encode(payload)])
    }

    /// Deletes `object`; returns the new revision. `not_found` if missing.
    @discardableResult
    public func delete(_ object: String, if conditions: [WriteCondition] = []) async throws -> Int64 {
        try await write(.delete(object, if: conditions))
    }

    /// The whole of `object` decoded as `Value`, with the current revision. `not_found` if missing.
    public func get<Value: Decodable>(_ object: String, as type: Value.Type) async throws -> (value: Value, rev: Int64) {
        try await read(["object": .string(object)], as: Value.self)
    }

    /// The value at `keyPath` of `object` decoded as `Value`, with the current revision.
    public func get<Value: Decodable>(_ keyPath: String, of object: String, as type: Value.Type) async throws -> (value: Value, rev: Int64) {
        try await read(["object": .string(object), "keyPath": .string(keyPath)], as: Value.self)
    }

    /// The whole of `object` as JSON.
    public func get(_ object: String) async throws -> JSONValue {
        try await get(object, as: JSONValue.self).value
    }

    /// The value at `keyPath` of `object` as JSON.
    public func get(_ keyPath: String, of object: String) async throws -> JSONValue {
        try await get(keyPath, of: object, as: JSONValue.self).value
    }

    /// Sends `get` with `params` and decodes its value.
    private func read<Value: Decodable>(_ params: [String: JSONValue], as type: Value.Type) async throws -> (value: Value, rev: Int64) {
        let reply = try await request("get", params)
        return (try ValueCoding.decode(Value.self, from: reply["value"] ?? .null), reply["rev"]?.intValue ?? 0)
    }

    /// Sets `keyPath` of `object` to `value`; with `ttl`, the object's time to live becomes `ttl` from now
    /// (`.zero`: it no longer expires). Returns the new revision.
    @discardableResult
    public func set(_ keyPath: String, of object: String, to value: some Encodable & Sendable, ttl: Duration? = nil,
                    if conditions: [WriteCondition] = []) async throws -> Int64 {
        try await write(.set(keyPath, of: object, to: value, ttl: ttl, if: conditions))
    }

    /// Adds `step` to the number at `keyPath` of `object`, atomically on the server (a missing or null
    /// value counts as 0; integers stay integers). Returns the new value and revision. `type_mismatch`
    /// when the value is not a number, `out_of_range` past 64-bit integers; needs read and write.
    @discardableResult
    public func increment(_ keyPath: String, of object: String, by step: Int64 = 1,
                          if conditions: [WriteCondition] = []) async throws -> (value: JSONValue, rev: Int64) {
        try await increment(keyPath, of: object, step: .int(step), conditions)
    }

    /// `increment(_:of:by:)` by a fractional step: the stored value becomes a double.
    @discardableResult
    /// Disfavoured, so that an integer literal (`by: -30`) takes the integer step.
    @_disfavoredOverload
    public func increment(_ keyPath: String, of object: String, by step: Double,
                          if conditions: [WriteCondition] = []) async throws -> (value: JSONValue, rev: Int64) {
        try await increment(keyPath, of: object, step: .double(step), conditions)
    }

    private func increment(_ keyPath: String, of object: String, step: JSONValue,
                           _ conditions: [WriteCondition]) async throws -> (value: JSONValue, rev: Int64) {
        let operation = try WriteOperation.increment(keyPath, of: object, step: step, if: conditions)
        let reply = try await request(operation.op, operation.params, isWrite: true)
        guard let value = reply["value"], let rev = reply["rev"]?.intValue else {
            throw KVODError.malformedReply("an 'increment' reply without value or rev")
        }
        return (value, rev)
    }

    /// Inserts `values` into the array at `keyPath`: at `indexes` (positions in the resulting array), one
    /// after another from `index`, or appended when both are nil. Returns the new revision.
    @discardableResult
    public func insert<Element: Encodable & Sendable>(_ keyPath: String, of object: String, values: [Element],
                                                       at index: Int? = nil, indexes: ArrayIndexes? = nil,
                                                       if conditions: [WriteCondition] = []) async throws -> Int64 {
        try await write(.insert(keyPath, of: object, values: values, at: index, indexes: indexes, if: conditions))
    }

    /// Removes the elements at `indexes` (positions in the current array); returns the new revision.
    @discardableResult
    public func remove(_ keyPath: String, of object: String, indexes: ArrayIndexes,
                       if conditions: [WriteCondition] = []) async throws -> Int64 {
        try await write(.remove(keyPath, of: object, indexes: indexes, if: conditions))
    }

    /// Replaces the elements at `indexes` with `values`, matched in order; returns the new revision.
    @discardableResult
    public func replace<Element: Encodable & Sendable>(_ keyPath: String, of object: String, indexes: ArrayIndexes,
                                                        with values: [Element], if conditions: [WriteCondition] = []) async throws -> Int64 {
        try await write(.replace(keyPath, of: object, indexes: indexes, with: values, if: conditions))
    }

    /// One page of object ids.
    public struct ListPage: Sendable, Equatable {
        /// The ids, sorted.
        public let objects: [String]
        /// True when ids remain after the last one (ask again with `after: objects.last`).
        public let more: Bool
        /// Makes a page (for tests and adapters).
        public init(objects: [String], more: Bool) {
            self.objects = objects
            self.more = more
        }
    }

    /// One page of object ids after `after`, at most `limit`.
    public func list(limit: Int? = nil, after: String? = nil) async throws -> ListPage {
        var params: [String: JSONValue] = [:]
        if let limit { params["limit"] = .int(Int64(limit)) }
        if let after { params["after"] = .string(after) }
        let reply = try await request("list", params)
        return ListPage(objects: reply["objects"]?.arrayValue?.compactMap(\.stringValue) ?? [],
                        more: reply["more"] == .bool(true))
    }

    /// Every object id, read in pages of `pageSize` (each id once, in order, even while objects come and go).
    public func listAll(pageSize: Int = 1000) async throws -> [String] {
        var ids: [String] = []
        var after: String?
        while true {
            let page = try await list(limit: pageSize, after: after)
            ids += page.objects
            guard page.more, let last = page.objects.last else { return ids }
            after = last
        }
    }

    /// One observer of an object, as `info` lists it.
    public struct ObserverInfo: Sendable, Equatable {
        /// The subscription id.
        public let sub: Int64
        /// The observed key path.
        public let keyPath: String
        /// The options asked for.
        public let options: [String]
        /// The observing connection's id, when the server shows it.
        public let connection: Int64?
    }

    /// The observers of `object`. `not_found` if missing.
    public func info(_ object: String) async throws -> [ObserverInfo] {
        let reply = try await request("info", ["object": .string(object)])
        return (reply["observers"]?.arrayValue ?? []).map { entry in
            ObserverInfo(sub: entry["sub"]?.intValue ?? 0, keyPath: entry["keyPath"]?.stringValue ?? "",
                         options: entry["options"]?.arrayValue?.compactMap(\.stringValue) ?? [],
                         connection: entry["connection"]?.intValue)
        }
    }

    // MARK: - Classes and bindings

    /// Defines (or redefines) a class from its definition (docs/protocol.md, "Classes"); returns its name.
    @discardableResult
    public func defineClass(_ definition: some Encodable & Sendable) async throws -> String {
        let reply = try await request("defineClass", ["class": try ValueCoding.encode(definition)], isWrite: true)
        return reply["name"]?.stringValue ?? ""
    }

    /// Every class definition, canonical form, sorted by name.
    public func classes() async throws -> [JSONValue] {
        try await request("classes")["classes"]?.arrayValue ?? []
    }

    /// A key path of an object: a binding's source or target.
    public struct Endpoint: Sendable, Equatable, Codable {
        /// The object's id.
        public var object: String
        /// The key path in it.
        public var keyPath: String
        /// The key path `keyPath` of `object`.
        public init(_ keyPath: String, of object: String) {
            self.object = object
            self.keyPath = keyPath
        }
        var json: JSONValue { ["object": .string(object), "keyPath": .string(keyPath)] }
    }

    /// What `bind` and `combineLatest` answer.
    public struct BindingReply: Sendable, Equatable {
        /// The binding's id.
        public let binding: Int64
        /// The current revision.
        public let rev: Int64
    }

    /// Binds `to` to `from`, with optional `filter` and `convert` expressions; `now` applies it at once.
    public func bind(from: Endpoint, to: Endpoint, filter: String? = nil, convert: String? = nil, now: Bool = false) async throws -> BindingReply {
        var params: [String: JSONValue] = ["from": from.json, "to": to.json]
        if let filter { params["filter"] = .string(filter) }
        if let convert { params["convert"] = .string(convert) }
        if now { params["now"] = true }
        return try await binding("bind", params)
    }

    /// Writes `reduce` over the current values of `sources` (`$0`, `$1`, …) to `to` whenever one changes.
    public func combineLatest(_ sources: [Endpoint], to: Endpoint, reduce: String, filter: String? = nil, now: Bool = false) async throws -> BindingReply {
        var params: [String: JSONValue] = ["sources": .array(sources.map(\.json)), "to": to.json, "reduce": .string(reduce)]
        if let filter { params["filter"] = .string(filter) }
        if now { params["now"] = true }
        return try await binding("combineLatest", params)
    }

    /// Removes a binding; false for an unknown id (removing twice is safe).
    @discardableResult
    public func unbind(_ binding: Int64) async throws -> Bool {
        try await request("unbind", ["binding": .int(binding)], isWrite: true)["removed"] == .bool(true)
    }

    /// Every binding's definition with its id, sorted by id.
    public func bindings() async throws -> [JSONValue] {
        try await request("bindings")["bindings"]?.arrayValue ?? []
    }

    // MARK: - Users (administrators)

    /// A user-administration operation (`userAdd`, `userRemove`, `userList`, `userPasswd`, `userGrant`,
    /// `userRevoke`, `tokenCreate`, `tokenRevoke`; docs/protocol.md, "Managing users online") with raw
    /// parameters; returns the reply's fields.
    public func userAdministration(_ op: String, _ params: [String: JSONValue] = [:]) async throws -> JSONValue {
        try await request(op, params, isWrite: op != "userList")
    }

    // MARK: - Helpers

    private func write(_ operation: WriteOperation) async throws -> Int64 {
        let reply = try await request(operation.op, operation.params, isWrite: true)
        guard let rev = reply["rev"]?.intValue else { throw KVODError.malformedReply("a '\(operation.op)' reply without rev") }
        return rev
    }

    private func binding(_ op: String, _ params: [String: JSONValue]) async throws -> BindingReply {
        let reply = try await request(op, params, isWrite: true)
        return BindingReply(binding: reply["binding"]?.intValue ?? 0, rev: reply["rev"]?.intValue ?? 0)
    }
}
