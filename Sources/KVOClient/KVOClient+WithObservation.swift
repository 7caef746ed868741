import KVOJSON

extension KVOClient {
    /// Observes `keyPath` on `object` for the duration of `body`: the server observation is made and
    /// accepted before `body` runs (a refusal such as `not_found` is thrown here, and no change after this
    /// call begins is missed), `body` iterates the changes, and the observation ends (`unobserve`) as soon as
    /// `body` returns or throws, whatever `body` did with the sequence. The scoped form for loops that
    /// `break`: the one that unobserves deterministically in top-level code too, where a plain
    /// `for try await ... { break }` keeps its iterator, and the server observation, until the program ends.
    ///
    /// ```swift
    /// try await kvod.withObservation("date", of: "clock", options: [.initial, .new], as: String.self) { changes in
    ///     for try await change in changes {
    ///         print(change.new ?? "")
    ///         if change.new == "Friday" { break }   // unobserves when the closure returns
    ///     }
    /// }
    /// ```
    ///
    /// `body` runs on the caller's actor (`isolation`). `sinceRev` and `buffering` are as for `subscribe`
    /// and `observe`. Returns what `body` returns.
    public func withObservation<Value: Decodable & Sendable, Result>(
        _ keyPath: String, of object: String, options: ObservationOptions = [.new], as type: Value.Type,
        buffering: ObservationBuffering = .default, sinceRev: Int64? = nil,
        isolation: isolated (any Actor)? = #isolation,
        _ body: (KVOObservation<Value>) async throws -> Result
    ) async throws -> Result {
        let changes = try await subscribe(keyPath, of: object, options: options, as: type, buffering: buffering, sinceRev: sinceRev)
        defer { changes.cancel() }
        return try await body(changes)
    }

    /// `withObservation(_:of:options:as:buffering:sinceRev:isolation:_:)` for a pattern observation
    /// (`observe(pattern:keyPath:options:as:)`): ends when `body` returns or throws.
    public func withObservation<Value: Decodable & Sendable, Result>(
        pattern: String, keyPath: String? = nil, options: ObservationOptions = [.new], as type: Value.Type,
        buffering: ObservationBuffering = .default, sinceRev: Int64? = nil,
        isolation: isolated (any Actor)? = #isolation,
        _ body: (KVOObservation<Value>) async throws -> Result
    ) async throws -> Result {
        let changes = try await subscribe(pattern: pattern, keyPath: keyPath, options: options, as: type, buffering: buffering,
                                          sinceRev: sinceRev)
        defer { changes.cancel() }
        return try await body(changes)
    }
}
