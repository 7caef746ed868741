/// Typed key paths over your model: `observe(\TodoList.owner.city, of: "list-1")`. The key path is named from the
/// model's coding keys (`KeyPathNaming`), so it follows a renamed `CodingKeys` case; its value type is the
/// changes' and the request's value type; and the object id, the one `String` left, is labelled, so the two
/// cannot be swapped. The string forms (`observe(_:of:...)`) stay for key paths known only at run time.
/// Any thread.
extension KVOClient {
    /// kvod's dotted key path for `keyPath` (`\TodoList.owner.city` is `"owner.city"`, with `CodingKeys`
    /// applied). Throws `KVODError.coding` for a key path that cannot be named from the model's coding keys
    /// (docs: `KeyPathNaming`); use the string forms for those.
    public static func keyPathName<Root: Decodable, Value>(_ keyPath: KeyPath<Root, Value>) throws(KVODError) -> String {
        try KeyPathNaming.name(of: keyPath)
    }

    /// The changes of `keyPath` on `object`, decoded as the key path's value type. Lazy, like
    /// `observe(_:of:options:as:buffering:)`: the server observation is made when the iteration starts.
    public func observe<Root: Decodable, Value: Decodable & Sendable>(
        _ keyPath: KeyPath<Root, Value>, of object: String, options: ObservationOptions = [.new],
        buffering: ObservationBuffering = .default
    ) throws(KVODError) -> KVOObservation<Value> {
        observe(try KeyPathNaming.name(of: keyPath), of: object, options: options, as: Value.self, buffering: buffering)
    }

    /// Like `observe(_:of:options:buffering:)`, but makes the server observation now (eager): returns once kvod
    /// accepted it, and throws its refusal (`not_found`, `forbidden`, ...).
    public func subscribe<Root: Decodable, Value: Decodable & Sendable>(
        _ keyPath: KeyPath<Root, Value>, of object: String, options: ObservationOptions = [.new],
        buffering: ObservationBuffering = .default, sinceRev: Int64? = nil
    ) async throws -> KVOObservation<Value> {
        try await subscribe(try KeyPathNaming.name(of: keyPath), of: object, options: options, as: Value.self,
                            buffering: buffering, sinceRev: sinceRev)
    }

    /// The value at `keyPath` on `object`, decoded as the key path's value type, and the object's `rev`.
    public func get<Root: Decodable, Value: Decodable>(_ keyPath: KeyPath<Root, Value>, of object: String) async throws
        -> (value: Value, rev: Int64) {
        try await get(try KeyPathNaming.name(of: keyPath), of: object, as: Value.self)
    }

    /// Sets `keyPath` on `object` to `value` (of the key path's value type); returns the write's `rev`.
    @discardableResult
    public func set<Root: Decodable, Value: Encodable & Sendable>(_ keyPath: KeyPath<Root, Value>, of object: String,
                                                                   to value: Value) async throws -> Int64 {
        try await set(try KeyPathNaming.name(of: keyPath), of: object, to: value)
    }
}
