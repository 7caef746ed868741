import KVOJSON

/// One observation's shared state: its place on the server (`sub` on the current connection), how far
/// it has got (`lastRev`, `lastPriorRev`), the changes received and not yet taken by its consumer (bounded
/// by its `ObservationBuffering`), and the consumer waiting for them.
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
    /// A live query's `where` (pattern observations only); nil for every matching object.
    let filter: String?
    let options: ObservationOptions
    /// Where the first `observe` resumes from (`sinceRev`): replayed history first; nil for now.
    let sinceRev: Int64?
    /// What happens to changes nobody reads (applied by `deliver`, on the I/O thread).
    let buffering: ObservationBuffering
    /// The client it belongs to (kept alive by it: an observation being consumed keeps its client).
    private let client: ClientCore

    fileprivate struct State {
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
        /// Changes received, not yet taken by the consumer: `buffer[bufferStart...]` (`bufferingNewest`
        /// drops the oldest by moving `bufferStart`, compacting now and then).
        var buffer: [ChangeEvent] = []
        var bufferStart = 0
        /// `pausing`: the buffer filled and the server observation was stopped; the consumer's next call
        /// after taking the buffer observes again with `sinceRev`.
        var paused = false
        /// After a pause, the revision resumed from: the first change accepted then carries the gap.
        var resumedAfter: Int64?
        /// A resume after a pause was refused `too_large` and the observation was made afresh with
        /// `initial`: that initial change is delivered as a `resync`.
        var resyncing = false
        /// Changes dropped (`bufferingNewest` with nothing left buffered) that the next change accepted
        /// reports in its gap.
        var pendingGap: ChangeGap?
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
         isPattern: Bool = false, filter: String? = nil, buffering: ObservationBuffering = .default) {
        self.client = client
        self.filter = filter
        self.buffering = buffering
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
    /// observation ended with. Cancelling the calling task cancels the observation. A paused observation
    /// (`pausing`, its buffer taken) is resumed here, with `sinceRev`.
    func nextBatch() async throws -> [ChangeEvent] {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[ChangeEvent], any Error>) in
                var resumeFrom: Int64?
                var resume = false
                let outcome = state.withLock { state -> Result<[ChangeEvent], any Error>? in
                    if state.buffer.count > state.bufferStart {
                        return .success(state.takeBuffer())
                    }
                    if state.finished {
                        if let failure = state.failure { return .failure(failure) }
                        return .success([])
                    }
                    if state.paused {
                        state.paused = false
                        state.subscribing = true
                        state.resumedAfter = state.lastRev
                        resumeFrom = state.lastRev
                        resume = true
                    }
                    state.waiter = continuation
                    return nil
                }
                if let outcome { continuation.resume(with: outcome) }
                if resume { client.sendObserve(for: self, resumeFrom: resumeFrom, resuming: resumeFrom != nil) }
            }
        } onCancel: {
            cancel()
        }
    }

    /// How many changes wait for the consumer (at most the buffering policy's limit). Any thread.
    var bufferedCount: Int { state.withLock { $0.buffer.count - $0.bufferStart } }

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
            // A paused observation is resumed by its consumer (`nextBatch`), not by a reconnection.
            if state.finished || state.subscribing || state.sub != nil || state.paused { return nil }
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
            return (waiter, waiters, state.buffer.count > state.bufferStart)
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
            state.resyncing = false
        }
    }

    /// The `observe` that resumed a paused observation was refused: with `too_large` (the replay would not
    /// fit kvod's output buffer), observes afresh with `initial` and `new`, whose initial change is delivered
    /// as one `resync` change with the current value (what kvod sends when its history no longer reaches
    /// back; later changes then carry `new` even if not asked for). Returns false when this is not such a
    /// refusal: the caller ends the observation with `error`. I/O thread.
    func resumeRefused(_ error: KVODError) -> Bool {
        guard error.code == .tooLarge else { return false }
        let retry = state.withLock { state -> Bool in
            guard state.resumedAfter != nil, !state.finished, !state.resyncing else { return false }
            state.resyncing = true
            state.subscribing = true
            return true
        }
        if retry { client.sendObserve(for: self, resumeFrom: nil, resuming: false, resyncing: true) }
        return retry
    }

    /// Adds the changes the I/O thread parsed for this observation, dropping those at or before the
    /// last revision accepted (a replay overlapping what was delivered), as `SubscriptionSet` does for
    /// kvoclient, and applying the buffering policy. Returns true when the I/O thread must stop routing
    /// this `sub` here: the observation ended (a `sourceDeleted` or `forbidden` change: the server no
    /// longer knows its `sub`; or `endingWhenFull` overflowed) or paused (`pausing` overflowed); in the
    /// last two cases `unobserve` has been sent.
    func deliver(_ events: [ChangeEvent]) -> Bool {
        var ended = false
        var stopRouting = false
        var unobserveSub: Int64?
        let resumption = state.withLock { state -> (CheckedContinuation<[ChangeEvent], any Error>, [ChangeEvent])? in
            // Paused: what is still in flight for the old sub comes again with the resume's replay.
            if state.finished || state.paused { return nil }
            // A consumer waiting takes the whole batch (one socket read, at most 64 KiB of events, in memory
            // already): the limit bounds what waits unread, and pausing a reader that keeps up would only make
            // kvod replay what it sent again.
            let consumerWaits = state.waiter != nil
            for var event in events {
                if event.reason == .initial && state.resyncing {
                    event.reason = .resync
                    state.resyncing = false
                }
                // A signal carries the revision current when it was sent, not a change's: never a duplicate.
                if event.reason != .initial && event.reason != .resync && event.reason != .signal {
                    if let last = state.lastRev, event.rev <= last { continue }
                    if event.isPrior && state.lastPriorRev == event.rev { continue }
                }
                if !consumerWaits, let limit = buffering.limit, state.buffer.count - state.bufferStart >= limit {
                    switch buffering {
                    case .pausing:
                        state.paused = true
                    case .endingWhenFull:
                        state.finished = true
                        state.failure = .bufferFull(limit: limit, object: object, keyPath: keyPath, resumeFrom: state.lastRev)
                        ended = true
                    case .bufferingNewest, .latestOnly:
                        state.dropOldest()
                    }
                    if state.paused || state.finished {
                        unobserveSub = state.sub
                        state.sub = nil
                        stopRouting = true
                        break
                    }
                }
                if event.reason == .signal {
                    // Resuming is about changes: a signal moves nothing.
                } else if event.reason == .initial || event.reason == .resync {
                    state.lastRev = event.rev
                    state.lastPriorRev = nil
                } else if event.isPrior {
                    state.lastPriorRev = event.rev
                } else {
                    state.lastRev = event.rev
                }
                if let resumedAfter = state.resumedAfter {
                    event.gap = .resumed(afterRev: resumedAfter)
                    state.resumedAfter = nil
                }
                if let pendingGap = state.pendingGap {
                    event.gap = pendingGap.merged(with: event.gap)
                    state.pendingGap = nil
                }
                if case .latestOnly = buffering { state.coalesce(into: &event, object: object) }
                state.buffer.append(event)
                if event.reason.endsObservation && !event.isPrior && !(isPattern && event.reason == .sourceDeleted) {
                    state.finished = true
                    state.sub = nil
                    ended = true
                    stopRouting = true
                    break
                }
            }
            guard let waiter = state.waiter, state.buffer.count > state.bufferStart else { return nil }
            state.waiter = nil
            return (waiter, state.takeBuffer())
        }
        if let unobserveSub { client.sendUnobserve(unobserveSub) }
        if let (waiter, batch) = resumption { waiter.resume(returning: batch) }
        if ended { client.unregister(self) }
        return stopRouting
    }
}

extension ObservationCore.State {
    // Called under the observation's lock.
    /// Takes every buffered change (for the consumer).
    mutating func takeBuffer() -> [ChangeEvent] {
        defer {
            buffer = []
            bufferStart = 0
        }
        return bufferStart == 0 ? buffer : Array(buffer[bufferStart...])
    }

    /// Drops the oldest buffered change (`bufferingNewest`); the next oldest, or the next change appended
    /// when none is left, carries the count.
    mutating func dropOldest() {
        let dropped = buffer[bufferStart]
        let gap = ChangeGap.dropped(count: 1).merged(with: dropped.gap)
        bufferStart += 1
        if bufferStart < buffer.count {
            buffer[bufferStart].gap = gap.merged(with: buffer[bufferStart].gap)
        } else {
            buffer = []
            bufferStart = 0
            pendingGap = gap.merged(with: pendingGap)
        }
        // Compact once the dropped prefix is as long as what is kept: amortized O(1) per change.
        if bufferStart > 0, bufferStart * 2 >= buffer.count {
            buffer.removeFirst(bufferStart)
            bufferStart = 0
        }
    }

    /// `latestOnly`: removes the unread changes of `event`'s object and counts them in `event.gap`.
    mutating func coalesce(into event: inout ChangeEvent, object observed: String) {
        guard buffer.count > bufferStart else { return }
        let key = event.object ?? observed
        var replaced: ChangeGap?
        buffer.removeAll { buffered in
            // Signals replace signals and changes changes: a signal is no value, and a change is no signal.
            guard (buffered.object ?? observed) == key, (buffered.reason == .signal) == (event.reason == .signal) else { return false }
            // A prior notification replaced is not a change the reader missed; its own gap still counts.
            let own = ChangeGap.dropped(count: buffered.isPrior ? 0 : 1)
            replaced = own.merged(with: buffered.gap).merged(with: replaced)
            return true
        }
        if let replaced, replaced != .dropped(count: 0) { event.gap = replaced.merged(with: event.gap) }
    }
}
