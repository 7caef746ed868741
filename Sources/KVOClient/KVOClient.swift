@_exported import KVOJSON

/// A client of kvod: typed async requests and observations as `AsyncSequence`s over one connection,
/// shared by every task using the client, with requests pipelined and matched by id.
///
/// ```swift
/// let kvod = try await KVOClient.connect(to: .init(host: "127.0.0.1", port: 7420))
/// try await kvod.withObservation("date", of: "clock", options: [.initial, .new, .old], as: String.self) { changes in
///     for try await change in changes {
///         print(change.reason, change.old as Any, change.new as Any, change.rev)
///         if change.new == "Friday" { break }   // unobserves as the closure returns
///     }
/// }
/// ```
///
/// The client owns a dedicated I/O thread (blocking reads, never on the cooperative pool) and the
/// socket; it reconnects with backoff when the connection is lost, logs in again and resumes every live
/// observation where it stopped. `close()` (or dropping the last reference to the client, its
/// observations included) ends it. `Sendable`: any task or thread may use it at once.
public final class KVOClient: Sendable {
    let core: ClientCore

    /// The configuration the client was connected with.
    public var configuration: Configuration { core.configuration }

    private init(core: ClientCore) {
        self.core = core
    }

    deinit { core.close() }

    /// Connects to kvod, says `hello` and logs in with the configuration's credentials. Throws
    /// `KVODError.cannotConnect` or `.tls` when the first connection fails and the server's error (e.g.
    /// `unauthenticated`) when the login is refused; later losses are handled by reconnection.
    public static func connect(to configuration: Configuration) async throws -> KVOClient {
        let core = ClientCore(configuration: configuration)
        core.announce(.connecting)
        try await core.start()
        return KVOClient(core: core)
    }

    /// Closes the connection: requests in flight fail with `KVODError.closed`, observations end by
    /// throwing it, the state becomes `closed`. Safe to call twice, from any thread.
    public func close() {
        core.close()
    }

    /// The connection's states, starting with the current one and ending after `closed`.
    public var states: AsyncStream<ConnectionState> { core.states() }

    /// The protocol features the server announced in its last `hello` reply (`features`: `ttl`, `conditions`,
    /// `ephemeral`, `sessions`, `liveQueries`, `sinceRev`, `atLeastRev`, `compactEvents`, …). The client sends a
    /// request that needs one only when it is here, and throws `KVODError.notAnnounced` otherwise (docs/protocol.md,
    /// "Requests and replies": the server refuses a field it does not know).
    public var serverFeatures: Set<String> { core.features }

    // MARK: - Raw requests

    /// Sends any operation with raw JSON parameters and returns the reply's fields (without `id` and
    /// `ok`) as a JSON object; throws `KVODError.server` for `ok: false`. `isWrite` says whether the
    /// operation may change state (it shapes the `connectionLost` error only).
    public func request(_ op: String, _ params: [String: JSONValue] = [:], isWrite: Bool = false) async throws -> JSONValue {
        try await core.request(op, params, isWrite: isWrite)
    }

    // MARK: - Observations

    /// The changes of `keyPath` on `object`, decoded as `Value`, as an `AsyncSequence` (lazy: the
    /// server observation is made when the iteration starts; errors such as `not_found` are thrown by
    /// the iteration). See `KVOObservation` for ending and cancelling (in top-level code prefer
    /// `withObservation`, which unobserves when its closure returns), and `ObservationBuffering` for what
    /// happens to changes nobody reads (by default at most 100,000 wait, kvod's default history; then the
    /// server observation pauses).
    public func observe<Value: Decodable & Sendable>(
        _ keyPath: String, of object: String, options: ObservationOptions = [.new], as type: Value.Type,
        buffering: ObservationBuffering = .default
    ) -> KVOObservation<Value> {
        KVOObservation(client: self, object: object, keyPath: keyPath, options: options, buffering: buffering, started: nil,
                       subscribedRevision: nil)
    }

    /// The changes of `keyPath` on `object` with their values as `JSONValue`.
    public func observe(_ keyPath: String, of object: String, options: ObservationOptions = [.new],
                        buffering: ObservationBuffering = .default) -> KVOObservation<JSONValue> {
        observe(keyPath, of: object, options: options, as: JSONValue.self, buffering: buffering)
    }

    /// Like `observe`, but makes the server observation now and returns once the server accepted it:
    /// throws its error (`not_found`, `forbidden`, ...) here. Changes from then on wait for the first
    /// iteration (a second iteration makes an observation of its own).
    ///
    /// `sinceRev` resumes from a revision the caller saw before (docs/protocol.md, "Resuming"): the
    /// changes after it that history still holds come first (or one `resync` change when it no longer
    /// reaches back), then live ones; `.initial` is not sent then.
    public func subscribe<Value: Decodable & Sendable>(
        _ keyPath: String, of object: String, options: ObservationOptions = [.new], as type: Value.Type = JSONValue.self,
        buffering: ObservationBuffering = .default, sinceRev: Int64? = nil
    ) async throws -> KVOObservation<Value> {
        let core = ObservationCore(client: self.core, object: object, keyPath: keyPath, options: options, sinceRev: sinceRev,
                                   buffering: buffering)
        try await Self.subscribed(core)
        return KVOObservation(client: self, object: object, keyPath: keyPath, options: options, buffering: buffering,
                              started: core, subscribedRevision: core.resumeRevision)
    }

    /// The objects whose ids match `pattern` (an exact id, or a glob where `*` stands for any run of
    /// characters: `user:*`), as an `AsyncSequence` of changes that each name their object
    /// (`Change.object`); docs/protocol.md, "Observing object sets (patterns)". With `keyPath`, the
    /// changes of that key path on every matching object, present and future (`created` when a matching
    /// object is created with a value there, `sourceDeleted` when one is deleted, which does not end the
    /// sequence); without it (nil or empty), the id set: `created` and `sourceDeleted` changes without
    /// values, and with `.initial` one change whose `new` lists the matching ids, sorted. Lazy like
    /// `observe`; resumes after a reconnection like any observation.
    ///
    /// With `filter` it is a live query (docs/protocol.md, "Live queries"): an expression over each
    /// object's key paths (`"status == 'open' && total > 100"`); only the objects on which it holds are in
    /// the set, `.initial` lists those, and an object gives `entered` when it comes into the set (with its
    /// value at `keyPath`), ordinary changes while in it, and `left` when it goes (also when deleted). After
    /// a reconnection a live query replays what it missed (or, past the server's history, `resync` changes:
    /// the set as it is then). Any thread.
    public func observe<Value: Decodable & Sendable>(
        pattern: String, keyPath: String? = nil, where filter: String? = nil, options: ObservationOptions = [.new],
        as type: Value.Type, buffering: ObservationBuffering = .default
    ) -> KVOObservation<Value> {
        KVOObservation(client: self, object: pattern, keyPath: keyPath ?? "", options: options, buffering: buffering,
                       started: nil, subscribedRevision: nil, isPattern: true, filter: filter)
    }

    /// `observe(pattern:keyPath:where:options:as:)` with values as `JSONValue`. Any thread.
    public func observe(pattern: String, keyPath: String? = nil, where filter: String? = nil,
                        options: ObservationOptions = [.new],
                        buffering: ObservationBuffering = .default) -> KVOObservation<JSONValue> {
        observe(pattern: pattern, keyPath: keyPath, where: filter, options: options, as: JSONValue.self,
                buffering: buffering)
    }

    /// Like `observe(pattern:keyPath:where:options:as:)`, but makes the server observation now and returns
    /// once the server accepted it (throws its error, such as `bad_request` for a malformed pattern or
    /// `invalid_expression` for a malformed `filter`, here). `sinceRev` resumes as for
    /// `subscribe(_:of:options:as:sinceRev:)`. Any thread.
    public func subscribe<Value: Decodable & Sendable>(
        pattern: String, keyPath: String? = nil, where filter: String? = nil, options: ObservationOptions = [.new],
        as type: Value.Type = JSONValue.self, buffering: ObservationBuffering = .default, sinceRev: Int64? = nil
    ) async throws -> KVOObservation<Value> {
        let core = ObservationCore(client: self.core, object: pattern, keyPath: keyPath ?? "", options: options,
                                   sinceRev: sinceRev, isPattern: true, filter: filter, buffering: buffering)
        try await Self.subscribed(core)
        return KVOObservation(client: self, object: pattern, keyPath: keyPath ?? "", options: options, buffering: buffering,
                              started: core, subscribedRevision: core.resumeRevision, isPattern: true, filter: filter)
    }

    /// Starts `core`'s server observation and waits for the server's answer; a refusal cancels it and is thrown.
    static func subscribed(_ core: ObservationCore) async throws {
        core.start()
        do {
            try await core.awaitSubscribed()
        } catch {
            core.cancel()
            throw error
        }
    }

    /// How many observations the client keeps on the server and resubscribes after a reconnection: started,
    /// and not yet ended (cancelled, refused by the server, or ended by `sourceDeleted`/`forbidden`). Once a
    /// request sent after a reconnection has been answered, every resubscription sent before it has been
    /// answered too (replies come in order), so this count then tells whether any was refused. Any thread.
    public var liveObservationCount: Int {
        core.state.withLock { $0.live.count }
    }
}
