#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import KVOJSON

/// The state a `KVOClient` shares between the tasks using it and its I/O thread: requests awaiting
/// replies, bytes waiting to be written, live observations, the connection state and its watchers.
///
/// Any thread may call its methods; all state is under one lock (`state`), held briefly; continuations
/// and handlers run outside it. The I/O thread (`IOLoop`) owns the socket, reads, and routes events.
final class ClientCore: Sendable {
    let configuration: KVOClient.Configuration

    /// What a request waits for.
    enum Purpose: Sendable {
        /// A caller awaits the reply.
        case caller(CheckedContinuation<JSONValue, any Error>)
        /// `observe` for this observation (first time or resumed).
        case observe(ObservationCore)
        /// `unobserve` of this sub: the I/O thread stops routing it.
        case unobserve(Int64)
        /// The handshake on a new connection (`hello`, `auth`).
        case handshake(isLast: Bool)
        /// The `session` with `resume` a reconnection sends for the client's session (docs/protocol.md, "Presence").
        case sessionResume(String)
        /// The heartbeat's `ping`.
        case heartbeat
    }

    struct Pending {
        let op: String
        let isWrite: Bool
        let purpose: Purpose
        let deadline: Double?
        /// The connection it was written on; 0 while held for the next connection.
        var generation: Int
        /// The line, kept while held.
        var heldLine: [UInt8]?
    }

    struct State {
        var nextID: Int64 = 1
        var pending: [Int64: Pending] = [:]
        /// The current connection's number (1 for the first); 0 while disconnected.
        var generation = 0
        /// The last generation given out.
        var lastGeneration: Int?
        /// The socket and TLS session of the current connection.
        var descriptor: Int32 = -1
        var isTLS = false
        /// Bytes for the current connection not yet written: requests append, the I/O thread alone takes
        /// and writes them (`flush`, `takeOutputForTLS`), so no write ever runs beside another or beside the
        /// descriptor's closing (`connectionLost`, also the I/O thread's).
        var output: [UInt8] = []
        /// The I/O thread was woken and has not looked yet.
        var woken = false
        /// The I/O thread is handing out a chunk of replies and events, and flushes `output` when it is done:
        /// a request made meanwhile (typically by a task its replies resumed) only appends its line, so the
        /// requests of many tasks leave in one `send` instead of one each (`enqueue`, `endDispatch`).
        var dispatching = false
        /// Live observations, to resubscribe after a reconnection.
        var live: [ObjectIdentifier: ObservationCore] = [:]
        var connectionState: ConnectionState = .connecting
        var stateWatchers: [Int: AsyncStream<ConnectionState>.Continuation] = [:]
        var nextWatcher = 0
        var closed = false
        /// The first connection's outcome is awaited by `KVOClient.connect`.
        var connectWaiter: CheckedContinuation<Void, any Error>?
        /// The client's session (`KVOClient.startSession`), resumed on every reconnection; nil: none, or lost.
        var session: KVOSession?
        /// Told when a reconnection finds the session ended (`KVOClient.onSessionLost`).
        var sessionLostHandler: (@Sendable (KVOSession) -> Void)?
        /// The protocol features the server announced in its last `hello` reply (`features`); empty before the first
        /// and from a server that announces none.
        var features: Set<String> = []
    }

    let state = Locked(State())
    private let wakeRead: Int32
    private let wakeWrite: Int32

    init(configuration: KVOClient.Configuration) {
        self.configuration = configuration
        (wakeRead, wakeWrite) = Socket.makeWakePipe()
    }

    deinit {
        Socket.closeDescriptor(wakeRead)
        Socket.closeDescriptor(wakeWrite)
    }

    var wakeDescriptor: Int32 { wakeRead }

    // MARK: - Starting and closing

    /// Starts the I/O thread and waits for the first connection and handshake.
    func start() async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            state.withLock { $0.connectWaiter = continuation }
            let loop = IOLoop(core: self)
            IOThread.start { loop.run() }
        }
    }

    /// Closes the client: fails every request with `.closed`, ends every observation, stops the I/O thread.
    func close() {
        let (pending, live, watchers, waiter) = state.withLock { state in
            if state.closed { return ([Int64: Pending](), [ObjectIdentifier: ObservationCore](), [Int: AsyncStream<ConnectionState>.Continuation](), nil as CheckedContinuation<Void, any Error>?) }
            state.closed = true
            state.connectionState = .closed
            let result = (state.pending, state.live, state.stateWatchers, state.connectWaiter)
            state.pending = [:]
            state.live = [:]
            state.stateWatchers = [:]
            state.connectWaiter = nil
            return result
        }
        for (_, request) in pending { fail(request, with: .closed) }
        for (_, observation) in live { observation.finish(failure: .closed) }
        for (_, watcher) in watchers {
            watcher.yield(.closed)
            watcher.finish()
        }
        waiter?.resume(throwing: KVODError.closed)
        wake()
    }

    var isClosed: Bool { state.withLock { $0.closed } }

    // MARK: - Requests

    /// Sends `op` with `params` and returns the reply (without `id` and `ok`), or throws the server's error.
    /// Cancelling the calling task ends the request at once with `CancellationError` (connected or not; a
    /// request already written may still take effect on the server, its late reply is ignored), and
    /// `requestTimeout` bounds it in every connection state (the I/O thread checks deadlines while
    /// connected and while waiting to reconnect).
    func request(_ op: String, _ params: [String: JSONValue], isWrite: Bool) async throws -> JSONValue {
        try requireAnnounced(op, params)
        let id = reserveID()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<JSONValue, any Error>) in
                enqueue(op, params, isWrite: isWrite, purpose: .caller(continuation), id: id)
                // Cancelled before the request was registered: the handler found nothing to end.
                if Task.isCancelled { cancelRequest(id) }
            }
        } onCancel: {
            cancelRequest(id)
        }
    }

    /// A request id, taken before the request is registered (so that a cancellation handler can name it).
    private func reserveID() -> Int64 {
        state.withLock { state -> Int64 in
            defer { state.nextID += 1 }
            return state.nextID
        }
    }

    /// Ends the caller's request `id` with `CancellationError` if it is still pending; a later reply to it is ignored.
    func cancelRequest(_ id: Int64) {
        let request = state.withLock { state -> Pending? in
            guard let request = state.pending[id], case .caller = request.purpose else { return nil }
            state.pending[id] = nil
            return request
        }
        if let request, case let .caller(continuation) = request.purpose {
            continuation.resume(throwing: CancellationError())
        }
    }

    /// Registers a request and writes it (or holds it until the next connection).
    func enqueue(_ op: String, _ params: [String: JSONValue], isWrite: Bool, purpose: Purpose,
                 onlyOnGeneration requiredGeneration: Int? = nil, id reservedID: Int64? = nil) {
        let id = reservedID ?? reserveID()
        let line = RequestLine.encode(op: op, id: id, params: params)
        let deadline: Double? = switch purpose {
        case .caller: configuration.requestTimeout.map { Socket.now() + $0 }
        default: nil
        }
        let outcome = state.withLock { state -> (refusal: KVODError?, corked: Bool) in
            if state.closed { return (.closed, false) }
            if let requiredGeneration, requiredGeneration != state.generation {
                return (.connectionLost(operation: op, wasWrite: isWrite, reason: "reconnected"), false)
            }
            var request = Pending(op: op, isWrite: isWrite, purpose: purpose, deadline: deadline, generation: state.generation)
            if state.generation == 0 {
                request.heldLine = line
            } else {
                state.output.append(contentsOf: line)
            }
            state.pending[id] = request
            return (nil, state.dispatching)
        }
        if let refusal = outcome.refusal {
            fail(Pending(op: op, isWrite: isWrite, purpose: purpose, deadline: nil, generation: 0), with: refusal)
            return
        }
        // The I/O thread is dispatching and flushes when it is done (`endDispatch`): leave the line for it.
        if outcome.corked { return }
        wake()
    }

    /// The I/O thread starts handing out a chunk of received lines: requests made until `endDispatch`
    /// wait in `output` and leave together.
    func beginDispatch() {
        state.withLock { $0.dispatching = true }
    }

    /// The I/O thread handed out its chunk: writes what requests made meanwhile left in `output`.
    func endDispatch() {
        state.withLock { $0.dispatching = false }
        flush()
    }

    /// Sends `unobserve` without waiting for the reply (the I/O thread stops routing the sub on it).
    func sendUnobserve(_ sub: Int64) {
        enqueue("unobserve", ["sub": .int(sub)], isWrite: false, purpose: .unobserve(sub))
    }

    /// Writes what `output` holds with one non-blocking `send`. The I/O thread's alone: it flushes after each
    /// chunk of replies it handed out (`endDispatch`), when woken by a new request, and when the socket takes
    /// bytes again. Requests made meanwhile, and what the socket did not take, wait for the loop's next pass
    /// (its `poll` asks for POLLOUT while plaintext output waits), so the lines of many tasks leave together.
    /// On TLS the loop writes through the session instead (`takeOutputForTLS`).
    func flush() {
        let taken = state.withLock { state -> (Int32, [UInt8], Int)? in
            guard !state.output.isEmpty, state.descriptor >= 0, !state.isTLS else { return nil }
            let bytes = state.output
            state.output = []
            return (state.descriptor, bytes, state.generation)
        }
        guard let (descriptor, bytes, generation) = taken else { return }
        var sent = 0
        var broken = false
        while sent < bytes.count {
            let result = bytes.withUnsafeBytes { raw in
                send(descriptor, raw.baseAddress! + sent, raw.count - sent, Socket.sendFlags | Int32(MSG_DONTWAIT))
            }
            if result < 0 {
                if errno == EINTR { continue }
                if errno != EAGAIN && errno != EWOULDBLOCK { broken = true }
                break
            }
            sent += result
        }
        // What the socket did not take goes back in front; a broken socket's bytes are dropped (the loop's
        // next poll or read ends the connection, failing their requests).
        guard sent < bytes.count, !broken else { return }
        state.withLock { state in
            if state.generation == generation { state.output = Array(bytes[sent...]) + state.output }
        }
    }

    /// Wakes the I/O thread (once until it looks).
    func wake() {
        let needed = state.withLock { state in
            defer { state.woken = true }
            return !state.woken
        }
        if needed {
            var byte: UInt8 = 1
            _ = write(wakeWrite, &byte, 1)
        }
    }

    /// Resumes or notifies whoever waits for `request` with `error`.
    func fail(_ request: Pending, with error: KVODError) {
        switch request.purpose {
        case let .caller(continuation): continuation.resume(throwing: error)
        case let .observe(observation):
            if case .server = error { observation.failed(error) }
        default: break
        }
    }

    // MARK: - Observations

    /// A new observation: becomes live and sends its `observe` (or holds it until connected).
    func register(_ observation: ObservationCore) {
        let closed = state.withLock { state in
            if !state.closed { state.live[ObjectIdentifier(observation)] = observation }
            return state.closed
        }
        if closed {
            observation.finish(failure: .closed)
            return
        }
        var fields: [String: JSONValue] = [:]
        if let filter = observation.filter { fields["where"] = .string(filter) }
        if let sinceRev = observation.sinceRev { fields["sinceRev"] = .int(sinceRev) }
        do throws(KVODError) {
            try requireAnnounced("observe", fields)
        } catch {
            unregister(observation)
            observation.finish(failure: error)
            return
        }
        sendObserve(for: observation, resumeFrom: observation.sinceRev, resuming: observation.sinceRev != nil)
    }

    /// Sends `observe` for `observation`, resuming after `resumeFrom` when `resuming`; `resyncing` asks for
    /// the current value (`initial` and `new`) instead (`ObservationCore.resumeRefused`).
    func sendObserve(for observation: ObservationCore, resumeFrom: Int64?, resuming: Bool, resyncing: Bool = false) {
        let options = resyncing ? observation.options.union([.initial, .new]) : observation.options
        var params: [String: JSONValue] = [
            "options": .array(options.wireNames(resuming: resuming)),
        ]
        params[observation.isPattern ? "pattern" : "object"] = .string(observation.object)
        if !observation.keyPath.isEmpty || !observation.isPattern { params["keyPath"] = .string(observation.keyPath) }
        if let filter = observation.filter { params["where"] = .string(filter) }
        if resuming, let resumeFrom { params["sinceRev"] = .int(resumeFrom) }
        enqueue("observe", params, isWrite: false, purpose: .observe(observation))
    }

    /// The observation ended or was cancelled: no resubscription.
    func unregister(_ observation: ObservationCore) {
        state.withLock { _ = $0.live.removeValue(forKey: ObjectIdentifier(observation)) }
    }

    // MARK: - Connection state

    /// Records and announces a new connection state.
    func announce(_ newState: ConnectionState) {
        let watchers = state.withLock { state -> [AsyncStream<ConnectionState>.Continuation] in
            guard !state.closed else { return [] }
            state.connectionState = newState
            return Array(state.stateWatchers.values)
        }
        for watcher in watchers { watcher.yield(newState) }
    }

    /// A stream of connection states, starting with the current one.
    func states() -> AsyncStream<ConnectionState> {
        let (stream, continuation) = AsyncStream<ConnectionState>.makeStream(bufferingPolicy: .unbounded)
        let (current, key, closed) = state.withLock { state -> (ConnectionState, Int, Bool) in
            let key = state.nextWatcher
            state.nextWatcher += 1
            if !state.closed { state.stateWatchers[key] = continuation }
            return (state.connectionState, key, state.closed)
        }
        continuation.yield(current)
        if closed {
            continuation.finish()
        } else {
            continuation.onTermination = { [weak self] _ in
                self?.state.withLock { _ = $0.stateWatchers.removeValue(forKey: key) }
            }
        }
        return stream
    }
}

extension ClientCore {
    /// Makes `descriptor` the current connection: writes the handshake (`hello`, then `auth` with
    /// credentials) first, then the requests held while disconnected, all under the lock so that no other
    /// request can get ahead of the handshake. Returns the new generation. Called by the I/O thread.
    func install(descriptor: Int32, isTLS: Bool) -> Int {
        var hello: [String: JSONValue] = ["client": .string(configuration.clientName)]
        if configuration.compactEvents { hello["events"] = "compact" }
        var handshake: [(String, [String: JSONValue])] = [("hello", hello)]
        switch configuration.credentials {
        case let .password(user, password)?: handshake.append(("auth", ["user": .string(user), "password": .string(password)]))
        case let .token(token)?: handshake.append(("auth", ["token": .string(token)]))
        case nil: break
        }
        return state.withLock { state in
            state.generation = (state.lastGeneration ?? 0) + 1
            state.lastGeneration = state.generation
            state.descriptor = descriptor
            state.isTLS = isTLS
            state.output = []
            for (index, (op, params)) in handshake.enumerated() {
                let id = state.nextID
                state.nextID += 1
                state.output.append(contentsOf: RequestLine.encode(op: op, id: id, params: params))
                state.pending[id] = Pending(op: op, isWrite: false, purpose: .handshake(isLast: index == handshake.count - 1),
                                            deadline: nil, generation: state.generation)
            }
            // The session goes on before any request held for this connection (one may depend on it).
            if let session = state.session, state.lastGeneration ?? 0 > 1 {
                let id = state.nextID
                state.nextID += 1
                state.output.append(contentsOf: RequestLine.encode(op: "session", id: id, params: ["resume": .string(session.id)]))
                state.pending[id] = Pending(op: "session", isWrite: false, purpose: .sessionResume(session.id),
                                            deadline: nil, generation: state.generation)
            }
            for id in state.pending.keys.sorted() {
                guard let line = state.pending[id]?.heldLine else { continue }
                state.output.append(contentsOf: line)
                state.pending[id]?.heldLine = nil
                state.pending[id]?.generation = state.generation
            }
            return state.generation
        }
    }

    /// A reconnection's `session` resume was refused (`not_found`: the session ended, its actions ran): the
    /// client has no session from now on, and its handler is told.
    func sessionLost(_ id: String) {
        let (session, handler) = state.withLock { state -> (KVOSession?, (@Sendable (KVOSession) -> Void)?) in
            guard let session = state.session, session.id == id else { return (nil, nil) }
            state.session = nil
            return (session, state.sessionLostHandler)
        }
        if let session, let handler { handler(session) }
    }

    /// The current connection is gone: every request written on it fails with `connectionLost` (the held
    /// ones wait for the next connection), `observe`/`unobserve` in flight are dropped (observations are
    /// resubscribed), and the descriptor is closed. Called by the I/O thread, which alone writes to it.
    func connectionLost(reason: String) {
        let (failed, live, descriptor) = state.withLock { state -> ([Pending], [ObservationCore], Int32) in
            var failed: [Pending] = []
            for (id, request) in state.pending {
                let isInternal: Bool = switch request.purpose {
                case .caller: false
                default: true
                }
                if request.generation != 0 || isInternal {
                    failed.append(request)
                    state.pending[id] = nil
                }
            }
            state.generation = 0
            let descriptor = state.descriptor
            state.descriptor = -1
            state.output = []
            return (failed, Array(state.live.values), descriptor)
        }
        if descriptor >= 0 { Socket.closeDescriptor(descriptor) }
        for request in failed {
            fail(request, with: .connectionLost(operation: request.op, wasWrite: request.isWrite, reason: reason))
        }
        for observation in live { observation.connectionLost() }
    }

    /// Removes and returns the request `id` answers; nil for an unknown id (timed out before).
    func takePending(_ id: Int64) -> Pending? {
        state.withLock { $0.pending.removeValue(forKey: id) }
    }

    /// Fails the callers' requests whose deadline passed.
    func expireRequests(now: Double) {
        let expired = state.withLock { state -> [Pending] in
            var expired: [Pending] = []
            for (id, request) in state.pending {
                if let deadline = request.deadline, deadline < now {
                    expired.append(request)
                    state.pending[id] = nil
                }
            }
            return expired
        }
        for request in expired { fail(request, with: .timedOut(operation: request.op)) }
    }

    /// The live observations not subscribed on the current connection.
    func liveObservations() -> [ObservationCore] {
        state.withLock { Array($0.live.values) }
    }

    /// The first connection failed: `connect` throws `error` and the client is closed.
    func failStart(_ error: KVODError) {
        let waiter = state.withLock { state in
            defer { state.connectWaiter = nil }
            return state.connectWaiter
        }
        waiter?.resume(throwing: error)
        close()
    }

    /// The handshake succeeded: `connect` returns (the first time) and the state is `connected`.
    func handshakeSucceeded() {
        let waiter = state.withLock { state in
            defer { state.connectWaiter = nil }
            return state.connectWaiter
        }
        announce(.connected)
        waiter?.resume()
    }

    /// Whether `connect` is still waiting (the first connection).
    var isFirstConnection: Bool { state.withLock { $0.connectWaiter != nil } }

    /// Takes the output for the I/O thread to write over TLS; nil when there is none.
    func takeOutputForTLS() -> [UInt8]? {
        state.withLock { state in
            guard !state.output.isEmpty else { return nil }
            defer { state.output = [] }
            return state.output
        }
    }

    /// Whether plaintext output waits for the socket to take it (the I/O thread then polls for POLLOUT).
    var hasPlaintextBacklog: Bool {
        state.withLock { !$0.isTLS && !$0.output.isEmpty }
    }

    /// The I/O thread drained the wake pipe.
    func clearWoken() {
        state.withLock { $0.woken = false }
    }
}
