import KVOJSON

/// The changes of one key path of one object, as an `AsyncSequence` of `Change<Value>`.
///
/// Each iteration is one observation on the server, made when the iteration first asks for a change
/// (`KVOClient.subscribe` makes it beforehand and hands it to the first iteration). Ending the iteration
/// (`break`, the iterator dropped) or cancelling the iterating task sends `unobserve`. The sequence ends
/// after a `sourceDeleted` or `forbidden` change (the server ended the observation), and throws the
/// server's error when it refuses the `observe` (`not_found`, `forbidden`, ...) or `KVODError.closed`
/// when the client is closed. Changes are delivered exactly once and in order across reconnections.
/// A value; any thread may make iterators, one task iterates each.
public struct KVOObservation<Value: Decodable & Sendable>: AsyncSequence, Sendable {
    /// Each change, decoded as `Value`.
    public typealias Element = Change<Value>

    let client: KVOClient
    let object: String
    let keyPath: String
    let options: ObservationOptions
    /// An observation started by `subscribe`, for the first iterator.
    let started: StartedObservation
    /// For a sequence returned by `KVOClient.subscribe`: the server's revision when it accepted the
    /// observation (the `observe` reply's `rev`), the point the observation resumes from until a change
    /// arrives. Nil for `KVOClient.observe` (nothing is asked before the iteration) and from servers that
    /// send no `rev`.
    public let subscribedRevision: Int64?
    /// Whether `object` is a pattern (`KVOClient.observe(pattern:keyPath:options:)`).
    var isPattern = false

    /// Makes an iterator: a server observation of its own (or the one `subscribe` started).
    public func makeAsyncIterator() -> Iterator {
        let core = started.take()
            ?? ObservationCore(client: client.core, object: object, keyPath: keyPath, options: options, isPattern: isPattern)
        return Iterator(handle: Handle(core: core, client: client))
    }

    /// Holds the observation `subscribe` started until an iterator takes it; cancels it when the
    /// sequence is dropped without being iterated, so that no server observation leaks.
    final class StartedObservation: Sendable {
        private let slot: Locked<ObservationCore?>
        init(_ core: ObservationCore?) { slot = Locked(core) }
        func take() -> ObservationCore? {
            slot.withLock { core in
                defer { core = nil }
                return core
            }
        }
        deinit { take()?.cancel() }
    }

    /// Stops its observation when dropped: the end of a `for try await` loop, `break` included.
    final class Handle: Sendable {
        let core: ObservationCore
        let client: KVOClient
        init(core: ObservationCore, client: KVOClient) {
            self.core = core
            self.client = client
        }
        deinit { core.cancel() }
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
                          keyPath: core.keyPath, rawOld: event.old, rawNew: event.new, decodingError: decodingError,
                          sub: sub, rawChange: event.change)
        }
    }
}
