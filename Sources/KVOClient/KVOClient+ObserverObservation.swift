import KVOJSON

extension KVOClient {
    /// Observes `keyPath` on `object` on behalf of `observer`, held weakly (the KVOController form): the
    /// handler gets the observer and each change, one at a time and in order, on `isolation` (the caller's
    /// actor, as for `observe(_:of:options:as:buffering:isolation:_:)`). Use the `observer` argument in the
    /// handler instead of capturing `self`: nothing then keeps the observer alive, and storing the token in
    /// the observer makes no cycle.
    ///
    /// The observation ends (`unobserve`) when the token is cancelled or dropped, so a token stored in the
    /// observer ends it when the observer is deallocated, at that moment. A token kept elsewhere ends it at
    /// the first change that finds the observer gone (the handler is not called then). The observer is
    /// released on the handler's actor only: the handler holds it strongly only while it runs.
    ///
    /// ```swift
    /// @MainActor final class ClockLabel {
    ///     var text = ""
    ///     var tokens: Set<ObservationToken> = []
    ///     init(_ kvod: KVOClient) {
    ///         kvod.observe("date", of: "clock", options: [.initial, .new], as: String.self, observer: self) { label, change in
    ///             label.text = change.new ?? ""
    ///         }.store(in: &tokens)
    ///     }
    /// }   // a ClockLabel let go unobserves: no [weak self], no leak
    /// ```
    public func observe<Observer: AnyObject, Value: Decodable & Sendable>(
        _ keyPath: String, of object: String, options: ObservationOptions = [.new], as type: Value.Type,
        buffering: ObservationBuffering = .default, observer: Observer,
        isolation: isolated (any Actor)? = #isolation, _ handler: @escaping (Observer, Change<Value>) -> Void
    ) -> ObservationToken {
        let (core, changes) = startedObservation(keyPath, of: object, options: options, as: Value.self, buffering: buffering)
        let delivery = Task { [weak observer] in
            // Capturing the isolated parameter isolates this task to the caller's actor (SE-0420).
            _ = isolation
            for try await change in changes {
                if Task.isCancelled { return }
                guard let observer else {
                    core.cancel()
                    return
                }
                handler(observer, change)
            }
        }
        return ObservationToken(core: core, delivery: delivery)
    }

    /// The observer form for an actor: the handler runs isolated to `observer` (held weakly, as above), one
    /// change at a time and in order, so it may use the actor's state directly (`{ actor, change in
    /// actor.count += 1 }`).
    public func observe<Observer: Actor, Value: Decodable & Sendable>(
        _ keyPath: String, of object: String, options: ObservationOptions = [.new], as type: Value.Type,
        buffering: ObservationBuffering = .default, observer: Observer,
        _ handler: @escaping @Sendable (isolated Observer, Change<Value>) -> Void
    ) -> ObservationToken {
        let (core, changes) = startedObservation(keyPath, of: object, options: options, as: Value.self, buffering: buffering)
        let delivery = Task { [weak observer] in
            for try await change in changes {
                if Task.isCancelled { return }
                guard let observer else {
                    core.cancel()
                    return
                }
                await handler(observer, change)
            }
        }
        return ObservationToken(core: core, delivery: delivery)
    }

    /// The server observation an observer form delivers from, started now, and the sequence reading it.
    private func startedObservation<Value: Decodable & Sendable>(
        _ keyPath: String, of object: String, options: ObservationOptions, as type: Value.Type, buffering: ObservationBuffering
    ) -> (ObservationCore, KVOObservation<Value>) {
        let core = ObservationCore(client: self.core, object: object, keyPath: keyPath, options: options, buffering: buffering)
        core.start()
        return (core, KVOObservation<Value>(client: self, object: object, keyPath: keyPath, options: options,
                                            buffering: buffering, started: core, subscribedRevision: nil))
    }

    /// Like `observe(_:of:options:as:buffering:observer:isolation:_:)`, with the values as `JSONValue`.
    public func observe<Observer: AnyObject>(
        _ keyPath: String, of object: String, options: ObservationOptions = [.new], buffering: ObservationBuffering = .default,
        observer: Observer, isolation: isolated (any Actor)? = #isolation,
        _ handler: @escaping (Observer, Change<JSONValue>) -> Void
    ) -> ObservationToken {
        observe(keyPath, of: object, options: options, as: JSONValue.self, buffering: buffering, observer: observer,
                isolation: isolation, handler)
    }
}
