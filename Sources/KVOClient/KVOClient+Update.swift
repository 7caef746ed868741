import KVOJSON

extension KVOClient {
    /// Changes the value at `keyPath` of `object` from what it is to what `transform` makes of it, without
    /// losing a concurrent writer's update (optimistic concurrency, like Firebase's `transaction()` and NATS
    /// KV's `update`): reads the value, writes `transform`'s result with `ifEquals` on the value read, and
    /// when another writer got there first (`conflict`) calls `transform` again with the value the conflict
    /// reports, up to `maxAttempts` writes. Returns the value written and its revision.
    ///
    /// ```swift
    /// try await kvod.update("balance", of: "acct", as: Int.self) { balance in (balance ?? 0) - 10 }
    /// ```
    ///
    /// `transform` gets nil for a missing key or null, may run more than once (keep it free of side
    /// effects), and ends the update by throwing (nothing written then). The first retries follow at once,
    /// with the value the conflict reported; from the fifth attempt on, each first waits a random moment (up
    /// to 2 ms) and reads the value again, so that a writer losing to another in step falls out of step
    /// instead of retrying with a value already stale. Throws the last `conflict` when every attempt lost,
    /// `not_found` for a missing object, cancellation, and what any write would.
    @discardableResult
    public func update<Value: Codable & Sendable>(
        _ keyPath: String, of object: String, as type: Value.Type, maxAttempts: Int = 100,
        _ transform: (Value?) throws -> Value
    ) async throws -> (value: Value, rev: Int64) {
        var current = try await get(keyPath, of: object)
        var attempt = 1
        while true {
            let old: Value? = current == .null ? nil : try ValueCoding.decode(Value.self, from: current)
            let new = try transform(old)
            do {
                // The condition compares with the JSON as read, not re-encoded from `Value`.
                let condition = WriteCondition(kind: .equals(keyPath: keyPath, value: current))
                return (new, try await set(keyPath, of: object, to: new, if: [condition]))
            } catch let error as KVODError {
                guard case let .server(.conflict, _, details) = error, attempt < maxAttempts, details.exists != false,
                      let now = details.value else { throw error }
                attempt += 1
                if attempt <= 4 {
                    current = now
                } else {
                    try await Task.sleep(nanoseconds: UInt64.random(in: 0...2_000_000))
                    current = try await get(keyPath, of: object)
                }
            }
        }
    }

    /// `update(_:of:as:maxAttempts:_:)` with a typed key path over the model (`\Account.balance`).
    @discardableResult
    public func update<Root: Decodable, Value: Codable & Sendable>(
        _ keyPath: KeyPath<Root, Value>, of object: String, maxAttempts: Int = 100, _ transform: (Value?) throws -> Value
    ) async throws -> (value: Value, rev: Int64) {
        try await update(try KeyPathNaming.name(of: keyPath), of: object, as: Value.self, maxAttempts: maxAttempts, transform)
    }
}
