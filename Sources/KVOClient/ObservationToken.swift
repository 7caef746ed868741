/// A closure-based observation (`KVOClient.observe(_:of:options:as:isolation:_:)`), alive as long as this
/// token: `cancel()` or dropping the last reference to the token unobserves on the server (the
/// KVOController behaviour), so correct Swift code cannot leak a server-side observation.
///
/// The token owns the observation and the task that delivers its changes to the handler, one at a time
/// and in order, on the actor the observation was made on. `Sendable`: any thread may cancel it, and
/// `cancel()` is safe to call twice (and after the observation ended by itself).
public final class ObservationToken: Sendable, Hashable {
    /// The observation, made on the server when the token is made.
    private let core: ObservationCore
    /// Iterates the observation and calls the handler; its value is how the observation ended.
    let delivery: Task<Void, any Error>

    init(core: ObservationCore, delivery: Task<Void, any Error>) {
        self.core = core
        self.delivery = delivery
    }

    deinit { cancel() }

    /// Stops the observation: unobserves on the server and stops the delivery. Called on the delivery
    /// actor, the handler is not called again once it returns (changes already received are dropped);
    /// called elsewhere, at most the change being handled at that moment completes. Safe twice; any thread.
    public func cancel() {
        delivery.cancel()
        core.cancel()
    }

    /// True once `cancel()` was called or the observation ended (`sourceDeleted`, `forbidden`, an
    /// `observe` refused, the client closed).
    public var isCancelled: Bool { delivery.isCancelled || core.isFinished }

    /// Keeps the token in `set` (as Combine's `AnyCancellable.store(in:)`): the observation lives as long as
    /// the set holds it. The usual place is a property of the observer.
    public func store(in set: inout Set<ObservationToken>) {
        set.insert(self)
    }

    /// Keeps the token in `array`.
    public func store(in array: inout [ObservationToken]) {
        array.append(self)
    }

    /// Tokens are equal when they are the same token.
    public static func == (lhs: ObservationToken, rhs: ObservationToken) -> Bool { lhs === rhs }

    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    /// Waits until the server accepted the observation; throws its refusal (`KVODError.server` with
    /// `notFound`, `forbidden`, ...), `KVODError.closed`, or `CancellationError` when cancelled first.
    public func subscribed() async throws {
        try await core.awaitSubscribed()
    }

    /// Waits until the observation ends: returns after `sourceDeleted`/`forbidden` or `cancel()`, throws
    /// the error it ended with (the server refused the `observe`, `KVODError.closed`, ...).
    public func finished() async throws {
        try await delivery.value
    }
}

extension KVOClient {
    /// Observes `keyPath` on `object` and calls `handler` with each change, decoded as `Value`, one at a
    /// time and in order, on `isolation`: by default the caller's actor (`#isolation`), so code on the
    /// main actor gets its changes on the main actor and may touch its UI state from the handler; from a
    /// nonisolated context the handler runs on the global concurrent executor (still one change at a
    /// time). To deliver on another actor, make the observation from a method of that actor.
    ///
    /// The observation is made on the server at once (`ObservationToken.subscribed()` waits for the
    /// server's acceptance). Keep the returned token: dropping it unobserves. A value that does not decode
    /// arrives as a change with `decodingError` set, like in the `AsyncSequence` form.
    ///
    /// The closure holds what it captures for as long as the token lives: a closure that uses `self`, kept
    /// in a token that `self` stores, is a cycle (neither is freed, and the server observation stays). Use
    /// the observer form `observe(_:of:options:as:buffering:observer:isolation:_:)`, which passes the observer
    /// (held weakly) to the handler, or `[weak self]`:
    ///
    /// ```swift
    /// @MainActor final class ClockLabel {
    ///     var text = ""
    ///     var token: ObservationToken?
    ///     func start(_ kvod: KVOClient) {
    ///         token = kvod.observe("date", of: "clock", options: [.initial, .new], as: String.self) { [weak self] change in
    ///             self?.text = change.new ?? ""   // on the main actor
    ///         }
    ///     }
    /// }
    /// ```
    public func observe<Value: Decodable & Sendable>(
        _ keyPath: String, of object: String, options: ObservationOptions = [.new], as type: Value.Type,
        buffering: ObservationBuffering = .default,
        isolation: isolated (any Actor)? = #isolation, _ handler: @escaping (Change<Value>) -> Void
    ) -> ObservationToken {
        let core = ObservationCore(client: self.core, object: object, keyPath: keyPath, options: options, buffering: buffering)
        core.start()
        let changes = KVOObservation<Value>(client: self, object: object, keyPath: keyPath, options: options, buffering: buffering,
                                            started: core, subscribedRevision: nil)
        let delivery = Task {
            // Capturing the isolated parameter isolates this task to the same actor (SE-0420), so the
            // handler, which may be non-Sendable and actor-bound, runs where it was made.
            _ = isolation
            for try await change in changes {
                // `cancel()` on this actor cancels the task before the next change is handed over.
                if Task.isCancelled { return }
                handler(change)
            }
        }
        return ObservationToken(core: core, delivery: delivery)
    }

    /// Like `observe(_:of:options:as:isolation:_:)`, with the values as `JSONValue`.
    public func observe(
        _ keyPath: String, of object: String, options: ObservationOptions = [.new], buffering: ObservationBuffering = .default,
        isolation: isolated (any Actor)? = #isolation, _ handler: @escaping (Change<JSONValue>) -> Void
    ) -> ObservationToken {
        observe(keyPath, of: object, options: options, as: JSONValue.self, buffering: buffering, isolation: isolation, handler)
    }
}
