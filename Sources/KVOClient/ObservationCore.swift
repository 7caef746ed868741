import KVOJSON

/// One observation's shared state: its place on the server (`sub` on the current connection), how far
/// it has got (`lastRev`, `lastPriorRev`), the changes received and not yet taken by its consumer, and
/// the consumer waiting for them.
///
/// Owned by the client (while live) and by the iterator consuming it. The I/O thread calls `subscribed`,
/// `deliver` and `connectionLost`; the consumer calls `next`; any thread may call `cancel`. Everything
/// is under one lock, held for a few instructions at a time; continuations are resumed outside it.
final class ObservationCore: Sendable {
    /// The object observed, or for a pattern observation its pattern.
    let object: String
    /// The key path observed (empty for an id-set pattern observation).
    let keyPath: String
    /// Whether `object` is a pattern (`observe` with `pattern`): a `sourceDeleted` then ends nothing.
    let isPattern: Bool
    let options: ObservationOptions
    /// Where the first `observe` resumes from (`sinceRev`): replayed history first; nil for now.
    let sinceRev: Int64?
    /// The client it belongs to (kept alive by it: an observation being consumed keeps its client).
    private let client: ClientCore

    private struct State {
        /// The subscription on the current connection; nil before the reply and after a loss.
        var sub: Int64?
        /// The subscription the first connection's `observe` reply gave (`Change.sub`).
        var firstSub: Int64?
        /// An `observe` is in flight on the current connection.
        var subscribing = false
        /// The revision of the last change accepted (prior notifications aside), or the first `observe`
        /// reply's `rev` before any: where a resumed observation starts (`sinceRev`).
        var lastRev: Int64?
        /// The revision of the last prior notification accepted, so a replay does not repeat it.
        var lastPriorRev: Int64?
        /// Changes received, not yet taken by the consumer.
        var buffer: [ChangeEvent] = []
        /// The consumer waiting for changes.
        var waiter: CheckedContinuation<[ChangeEvent], any Error>?
        /// Waiters of `awaitSubscribed` (the eager form).
        var subscribedWaiters: [CheckedContinuation<Void, any Error>] = []
        var isSubscribedOnce = false
        /// Set once: nothing more will be delivered (after the buffer is drained).
        var finished = false
        /// Why it finished with an error (nil: a normal end).
        var failure: KVODError?
        /// Set by `cancel`.
        var cancelled = false
    }

    private let state = Locked(State())

    init(client: ClientCore, object: String, keyPath: String, options: ObservationOptions, sinceRev: Int64? = nil,
         isPattern: Bool = false) {
        self.client = client
        self.object = object
        self.keyPath = keyPath
        self.isPattern = isPattern
        self.options = options
        self.sinceRev = sinceRev
        if let sinceRev { state.withLock { $0.lastRev = sinceRev } }
    }

    deinit {
        // The last owner let go without cancelling (cannot happen through the iterator, which cancels on
        // deinit; kept as a guard).
        let sub = state.withLock { $0.finished ? nil : $0.sub }
        if let sub { client.sendUnobserve(sub) }
    }

    // MARK: - Consumer side

    /// Starts observing on the server (once); later calls do nothing.
    func start() {
        let first = state.withLock { state -> Bool in
            if state.isSubscribedOnce || state.subscribing || state.finished || state.sub != nil { return false }
            state.subscribing = true
            return true
        }
        if first { client.register(self) }
    }

    /// True once nothing more will be delivered (cancelled, ended by the server, or the client closed).
    var isFinished: Bool { state.withLock { $0.finished } }

    /// Waits until the server accepted the first `observe` (or throws its error).
    func awaitSubscribed() async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let outcome = state.withLock { state -> Result<Void, KVODError>? in
                if state.isSubscribedOnce { return .success(()) }
                if state.finished { return .failure(state.failure ?? .closed) }
                state.subscribedWaiters.append(continuation)
                return nil
            }
            if let outcome { continuation.resume(with: outcome) }
        }
    }

    /// The next changes in order: a non-empty batch, or an empty one at the end. Throws the error the
    /// observation ended with. Cancelling the calling task cancels the observation.
    func nextBatch() async throws -> [ChangeEvent] {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[ChangeEvent], any Error>) in
                let outcome = state.withLock { state -> Result<[ChangeEvent], any Error>? in
                    if !state.buffer.isEmpty {
                        let batch = state.buffer
                        state.buffer = []
                        return .success(batch)
                    }
                    if state.finished {
                        if let failure = state.failure { return .failure(failure) }
                        return .success([])
                    }
                    state.waiter = continuation
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            cancel()
        }
    }

    /// Stops the observation: unobserves on the server (now, or when a pending `observe` is answered),
    /// ends the consumer's iteration. Safe to call twice and from any thread.
    func cancel() {
        let (sub, waiter, waiters, wasFinished) = state.withLock { state in
            let wasFinished = state.finished
            state.cancelled = true
            state.finished = true
            let sub = state.sub
            state.sub = nil
            let waiter = state.waiter
            state.waiter = nil
            let waiters = state.subscribedWaiters
            state.subscribedWaiters = []
            return (sub, waiter, waiters, wasFinished)
        }
        waiter?.resume(returning: [])
        for waiter in waiters { waiter.resume(throwing: CancellationError()) }
        guard !wasFinished else { return }
        client.unregister(self)
        if let sub { client.sendUnobserve(sub) }
    }

    /// The first connection's `sub` (set before any change is routed here); any thread.
    var firstSub: Int64? { state.withLock { $0.firstSub } }

    /// Where a resubscription would resume (`sinceRev`): the revision of the last change accepted, or
    /// the first `observe` reply's `rev` before any; nil before that reply. Any thread.
    var resumeRevision: Int64? { state.withLock { $0.lastRev } }

    // MARK: - I/O thread side

    /// What to send for a (re)subscription on a new connection: nil when finished or already subscribing.
    /// Marks it subscribing.
    func prepareSubscription() -> (resumeFrom: Int64?, resuming: Bool)? {
        state.withLock { state in
            if state.finished || state.subscribing || state.sub != nil { return nil }
            state.subscribing = true
            return (state.lastRev, state.lastRev != nil)
        }
    }

    /// The `observe` reply arrived: records `sub` (and `rev` as the starting point before any change).
    /// Returns false when the observation was cancelled meanwhile: the caller unobserves `sub`.
    func subscribed(sub: Int64, rev: Int64?) -> Bool {
        let (accepted, waiters) = state.withLock { state -> (Bool, [CheckedContinuation<Void, any Error>]) in
            state.subscribing = false
            if state.cancelled || state.finished { return (false, []) }
            state.sub = sub
            if state.firstSub == nil { state.firstSub = sub }
            if state.lastRev == nil { state.lastRev = rev }
            state.isSubscribedOnce = true
            let waiters = state.subscribedWaiters
            state.subscribedWaiters = []
            return (true, waiters)
        }
        for waiter in waiters { waiter.resume() }
        return accepted
    }

    /// The server refused the `observe`: the observation ends with `error`.
    func failed(_ error: KVODError) {
        finish(failure: error)
    }

    /// Ends the observation (the client closed, or the server refused it); the consumer gets what is
    /// buffered, then `failure` (or the end when nil).
    func finish(failure: KVODError?) {
        let (waiter, waiters, hasBuffered) = state.withLock { state in
            if state.finished { return (nil as CheckedContinuation<[ChangeEvent], any Error>?, [CheckedContinuation<Void, any Error>](), true) }
            state.finished = true
            state.failure = failure
            state.subscribing = false
            state.sub = nil
            let waiter = state.waiter
            state.waiter = nil
            let waiters = state.subscribedWaiters
            state.subscribedWaiters = []
            return (waiter, waiters, !state.buffer.isEmpty)
        }
        if let waiter {
            if let failure, !hasBuffered { waiter.resume(throwing: failure) } else { waiter.resume(returning: []) }
        }
        for waiter in waiters { waiter.resume(throwing: failure ?? .closed) }
    }

    /// The connection was lost: no subscription until the next `observe`.
    func connectionLost() {
        state.withLock { state in
            state.sub = nil
            state.subscribing = false
        }
    }

    /// Adds the changes the I/O thread parsed for this observation, dropping those at or before the
    /// last revision accepted (a replay overlapping what was delivered), as `SubscriptionSet` does for
    /// kvoclient. Returns true when the observation ended (a `sourceDeleted` or `forbidden` change):
    /// the server no longer knows its `sub`.
    func deliver(_ events: [ChangeEvent]) -> Bool {
        var ended = false
        let resumption = state.withLock { state -> (CheckedContinuation<[ChangeEvent], any Error>, [ChangeEvent])? in
            if state.finished { return nil }
            for event in events {
                if event.reason == .initial || event.reason == .resync {
                    state.lastRev = event.rev
                    state.lastPriorRev = nil
                } else {
                    if let last = state.lastRev, event.rev <= last { continue }
                    if event.isPrior {
                        if state.lastPriorRev == event.rev { continue }
                        state.lastPriorRev = event.rev
                    } else {
                        state.lastRev = event.rev
                    }
                }
                state.buffer.append(event)
                if event.reason.endsObservation && !event.isPrior && !(isPattern && event.reason == .sourceDeleted) {
                    state.finished = true
                    state.sub = nil
                    ended = true
                    break
                }
            }
            guard let waiter = state.waiter, !state.buffer.isEmpty else { return nil }
            state.waiter = nil
            let batch = state.buffer
            state.buffer = []
            return (waiter, batch)
        }
        if let (waiter, batch) = resumption { waiter.resume(returning: batch) }
        if ended { client.unregister(self) }
        return ended
    }
}
