import KVOJSON

/// The changes of one key path of one object, as an `AsyncSequence` of `Change<Value>`.
///
/// Each iteration is one observation on the server, made when the iteration first asks for a change
/// (`KVOClient.subscribe` makes it beforehand and hands it to the first iteration). Ending the iteration
/// (the iterator dropped) or cancelling the iterating task sends `unobserve`; `cancel()` ends every
/// iteration of the sequence at once, deterministically. (A `break` drops the iterator where the compiler
/// ends its lifetime: inside a function, at once; in top-level code, only when the program ends. There use
/// `KVOClient.withObservation`, which unobserves when its closure returns, or call `cancel()`.) The sequence
/// ends after a `sourceDeleted` or `forbidden` change (the server ended the observation), and throws the
/// server's error when it refuses the `observe` (`not_found`, `forbidden`, ...), `KVODError.closed` when
/// the client is closed, or `KVODError.bufferFull` (`ObservationBuffering.endingWhenFull`). Changes are
/// delivered exactly once and in order across reconnections; unread ones are bounded by `buffering`.
/// A value: copies share their iterations (`cancel()` on a copy ends them too). Any thread may make
/// iterators and call `cancel()`; one task iterates each iterator.
public struct KVOObservation<Value: Decodable & Sendable>: AsyncSequence, Sendable {
    /// Each change, decoded as `Value`.
    public typealias Element = Change<Value>

    let client: KVOClient
    let object: String
    let keyPath: String
    let options: ObservationOptions
    /// What happens to changes nobody reads (each iteration's observation applies it).
    public let buffering: ObservationBuffering
    /// The iterations' observations (the one `subscribe` started, for the first iterator), shared by copies.
    let control: Control
    /// For a sequence returned by `KVOClient.subscribe`: the server's revision when it accepted the
    /// observation (the `observe` reply's `rev`), the point the observation resumes from until a change
    /// arrives. Nil for `KVOClient.observe` (nothing is asked before the iteration) and from servers that
    /// send no `rev`.
    public let subscribedRevision: Int64?
    /// Whether `object` is a pattern (`KVOClient.observe(pattern:keyPath:options:)`).
    let isPattern: Bool
    /// A live query's `where` (`KVOClient.observe(pattern:keyPath:where:options:)`).
    let filter: String?

    init(client: KVOClient, object: String, keyPath: String, options: ObservationOptions,
         buffering: ObservationBuffering, started: ObservationCore?, subscribedRevision: Int64?, isPattern: Bool = false,
         filter: String? = nil) {
        self.client = client
        self.object = object
        self.keyPath = keyPath
        self.options = options
        self.buffering = buffering
        self.control = Control(started: started)
        self.subscribedRevision = subscribedRevision
        self.isPattern = isPattern
        self.filter = filter
    }

    /// Makes an iterator: a server observation of its own (or the one `subscribe` started). After
    /// `cancel()`, an iterator that ends at once without observing.
    public func makeAsyncIterator() -> Iterator {
        let core = control.take {
            ObservationCore(client: client.core, object: object, keyPath: keyPath, options: options, isPattern: isPattern,
                            filter: filter, buffering: buffering)
        }
        return Iterator(handle: Handle(core: core, control: control, client: client))
    }

    /// Ends every iteration of this sequence (and of its copies) now: `unobserve` on the server, and each
    /// loop's next call returns nil (an iterator made later ends at once too). Changes still buffered are
    /// dropped. Safe to call twice, after the observation ended by itself, and from any thread or task;
    /// it does not wait for the server's reply.
    public func cancel() {
        control.cancel()
    }

    /// True once `cancel()` was called.
    public var isCancelled: Bool { control.isCancelled }

    /// How many changes wait unread in this sequence's iterations (and in the observation `subscribe`
    /// started, before its first iteration); at most the `buffering` limit for each (one per object for
    /// `latestOnly`). Any thread.
    public var bufferedChangeCount: Int { control.bufferedCount }

    /// The observations of one sequence and its copies: the one `subscribe` started until an iterator
    /// takes it, and every iteration's, so that `cancel()` can end them. Cancels the started one when
    /// the sequence is dropped without being iterated, so that no server observation leaks. Any thread.
    final class Control: Sendable {
        private struct State {
            var started: ObservationCore?
            var iterating: [ObjectIdentifier: ObservationCore] = [:]
            var cancelled = false
        }
        private let state: Locked<State>

        init(started: ObservationCore?) { state = Locked(State(started: started)) }

        /// The observation for a new iterator: the started one, or one `make` returns; cancelled already
        /// when the sequence was.
        func take(orMake make: () -> ObservationCore) -> ObservationCore {
            let (core, cancelled) = state.withLock { state -> (ObservationCore, Bool) in
                let core = state.started ?? make()
                state.started = nil
                if !state.cancelled { state.iterating[ObjectIdentifier(core)] = core }
                return (core, state.cancelled)
            }
            if cancelled { core.cancel() }
            return core
        }

        /// An iterator is done with `core` (it was cancelled).
        func remove(_ core: ObservationCore) {
            state.withLock { _ = $0.iterating.removeValue(forKey: ObjectIdentifier(core)) }
        }

        func cancel() {
            let cores = state.withLock { state -> [ObservationCore] in
                state.cancelled = true
                var cores = Array(state.iterating.values)
                if let started = state.started { cores.append(started) }
                state.started = nil
                state.iterating = [:]
                return cores
            }
            for core in cores { core.cancel() }
        }

        var isCancelled: Bool { state.withLock { $0.cancelled } }

        var bufferedCount: Int {
            let cores = state.withLock { state in Array(state.iterating.values) + (state.started.map { [$0] } ?? []) }
            return cores.reduce(0) { $0 + $1.bufferedCount }
        }

        deinit {
            let started = state.withLock { state in
                defer { state.started = nil }
                return state.started
            }
            started?.cancel()
        }
    }

    /// Stops its observation when dropped: the end of a `for try await` loop, `break` included (where the
    /// compiler drops the iterator then: not in top-level code).
    final class Handle: Sendable {
        let core: ObservationCore
        let control: Control
        /// Keeps the client open while it is iterated (dropping the last `KVOClient` closes it).
        let client: KVOClient
        init(core: ObservationCore, control: Control, client: KVOClient) {
            self.core = core
            self.control = control
            self.client = client
        }
        deinit {
            core.cancel()
            control.remove(core)
        }
    }

    /// Iterates one observation. Not shared between tasks.
    public struct Iterator: AsyncIteratorProtocol {
        let handle: Handle
        private var batch: [ChangeEvent] = []
        private var position = 0
        /// `Change.sub`, read once from the observation with the first batch.
        private var firstSub: Int64?

        init(handle: Handle) { self.handle = handle }

        /// The next change; nil at the end (after `sourceDeleted`/`forbidden`, or when cancelled).
        public mutating func next() async throws -> Change<Value>? {
            if position == batch.count {
                handle.core.start()
                batch = try await handle.core.nextBatch()
                position = 0
                if batch.isEmpty { return nil }
                if firstSub == nil { firstSub = handle.core.firstSub }
            }
            let event = batch[position]
            position += 1
            if position == batch.count {
                batch = []
                position = 0
            }
            return Self.change(from: event, core: handle.core, sub: firstSub)
        }

        /// Decodes an event as a `Change<Value>`, reporting a value that does not decode in the change.
        static func change(from event: ChangeEvent, core: ObservationCore, sub: Int64?) -> Change<Value> {
            var decodingError: KVODError?
            func decode(_ value: JSONValue?) -> Value? {
                guard let value else { return nil }
                do throws(KVODError) {
                    return try ValueCoding.decode(Value.self, from: value)
                } catch {
                    decodingError = error
                    return nil
                }
            }
            let old = decode(event.old)
            let new = decode(event.new)
            return Change(reason: event.reason, kind: ChangeKind(rawValue: event.kind) ?? .setting, old: old, new: new,
                          indexes: event.indexes, isPrior: event.isPrior, rev: event.rev, object: event.object ?? core.object,
                          keyPath: event.reason == .signal ? "" : core.keyPath, rawOld: event.old, rawNew: event.new, decodingError: decodingError,
                          sub: sub, rawChange: event.change, gap: event.gap, cause: event.cause)
        }
    }
}
