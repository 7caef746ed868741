import CLibUV
import KVOEngine
import KVOModel
import KVOJSON
import KVOVersion
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// The kvod server: one libuv loop, its listener and connections, and the engine they share.
///
/// Data flows one way: bytes -> lines (`Connection`) -> requests (`RequestDecoder`) -> engine
/// (`RequestHandler`) -> notifications -> encoded events (`EventEncoder`) -> per-connection output,
/// written once per loop iteration by the check handle (sooner within a large burst: see
/// `flushEarlyIfOutputIsLarge()`). The loop thread, the one that calls `run()`,
/// owns all of it: no locks on the hot path. Only `stopHandle` may be used from another thread.
///
/// `Server` wires: what it holds below is the loop and its handles, the listeners, the hot path's arrays, the
/// users, and its parts, each a type that owns one concern's state (the store's health, the group commit's
/// cadence, held input, connection deadlines, sessions, compiled policies, rate-limited log lines, memory, the
/// cluster node; docs/design.md, "Server's parts"). The `Server+*.swift` files are what the server does with them.
public final class Server {
    // The wiring: what every part and extension uses.

    /// Made at start-up; SIGHUP changes only what can change while the server runs (`Server+Reload`).
    public internal(set) var configuration: ServerConfiguration
    var logger: Logger { configuration.logger }
    let loop: EventLoop
    /// Every time-based behaviour's clock (`ServerClock`): `configuration.clock`, or the system clock on `loop`.
    let clock: ServerClock
    /// When the server was made, on `clock` (monotonic and wall milliseconds): `status`'s uptime.
    let startedAt: (milliseconds: UInt64, wallMilliseconds: Int64)
    /// The engine and the requests' handling (`RequestHandler`).
    let handler: RequestHandler
    /// Counters and histograms for `GET /metrics` (`ServerMetrics`; loop thread only).
    let metrics = ServerMetrics()
    /// Stops the server from any thread.
    public let stopHandle: StopHandle
    /// Wakes the loop for `stopHandle`.
    let asyncHandle: UnsafeMutablePointer<uv_async_t>
    /// Runs at the end of each loop iteration: the expiry backlog, held input, the group commit, flushing
    /// (`Server+LoopCallbacks`).
    let checkHandle: UnsafeMutablePointer<uv_check_t>
    /// Fires every `housekeepingInterval`: expiries, ended sessions, the store's health, deadlines, suppressed-log
    /// summaries, memory given back after a burst (`Server+Housekeeping`). Never on the request path.
    let housekeepingHandle: UnsafeMutablePointer<uv_timer_t>
    var signalHandles: [UnsafeMutablePointer<uv_signal_t>] = []
    var isStopping = false

    // Listening (`Server+Listeners`, `Server+Accepting`).

    /// Every listener (`--port`, `--tls-port`, `--http-port`, `--unix`), each knowing what its connections
    /// speak (`Listener.stack`): accepting is the same for all of them.
    var listeners: [Listener] = []
    /// The Host and Origin rules of the HTTP listener, made when it is bound. Loop thread.
    var httpHostCheck: HTTPHostCheck?
    /// The TLS context new TLS connections start from; replaced by `reloadTLS()`, while open connections
    /// keep the one they started with.
    var tlsContext: TLSContext?
    /// Connections that fit under the descriptor limit (`DescriptorLimit`), read at start-up; a
    /// connection past it is refused, before libuv's accept runs out of descriptors and drops
    /// connections silently.
    let descriptorCapacity = DescriptorLimit.current().connectionCapacity

    // Connections, requests and fan-out: the per-request and per-event hot path, kept as plain stored
    // properties of the server (no part in between: `Server+FanOut`, `Server+Dispatch`).

    /// Open connections by slot (`ConnectionID.slot`): delivering an event finds its connection by
    /// array index, not by hashing. Freed slots are reused.
    /// Unretained: a connection is kept alive by its handle (`handle->data`) until its close
    /// callback, and leaves its slot when it starts closing, so every entry here is alive.
    @exclusivity(unchecked) var slots: [Unmanaged<Connection>?] = []
    /// One notification's encoded tails, back to back, reused (no allocation per notification once
    /// warm). `tailStarts[v]..<tailEnds[v]` is variant v's tail (`EventEncoder.variant(for:)`).
    @exclusivity(unchecked) var tailArena: [UInt8] = []
    @exclusivity(unchecked) var tailStarts = [Int](repeating: 0, count: EventEncoder.variantCount)
    @exclusivity(unchecked) var tailEnds = [Int](repeating: 0, count: EventEncoder.variantCount)
    var freeSlots: [UInt32] = []
    var openConnections = 0
    var lastConnectionID: UInt64 = 0
    /// Connections with output to write at the end of this iteration.
    var flushQueue: [Connection] = []
    /// The queue being flushed (swapped with `flushQueue`, so neither is reallocated per flush).
    var flushing: [Connection] = []
    /// Event bytes queued since the last flush, for `flushEarlyIfOutputIsLarge()`.
    var eventBytesSinceFlush = 0
    /// Scratch space reused by every request (no allocation per request once warm).
    var notifications: [ChangeNotification] = []
    var replyBuffer: [UInt8] = []
    /// `clock.nanoseconds` when the loop began handling the request being handled (`handleLine`), for
    /// `kvod_request_duration_seconds`; 0 outside any. On the system clock that is `uv_hrtime`: the metric measures
    /// the real loop (docs/design.md, "The clock"). A request answered later (a password check, a cluster
    /// write, an `atLeastRev` wait) keeps its own start and sets this again around its answer. Loop thread.
    var requestStarted: UInt64 = 0

    // Users (`Server+Authentication`, `Server+Sessions`, `Server+UserAdministration`).

    /// The users; when there are any, connections must `auth` before anything but `hello` and `ping`.
    let users: UserDirectory
    /// `--users FILE` (in memory): the file's lock, held shared for the whole run (`UsersFileLock`).
    let usersFileLock: UsersFileLock?
    /// Password checks, on the thread pool (set once the loop exists).
    var passwordChecks: PasswordVerificationQueue!
    /// Cluster mode with a store that keeps writes: users changed by stream entries applied since the last
    /// group commit, written with it (`persistUsers`). Loop thread.
    var uncommittedUsers = Set<String>()

    // The parts: each a type that owns its state, with its purpose in its file (docs/design.md, "Server's parts").

    /// Where the state is kept between runs (`Store`: SQLite with `--data`, a `MemoryStore` that keeps
    /// nothing in memory). Written once per loop iteration (group commit) when it keeps writes.
    let store: any Store
    /// Whether writes can be stored now, and the refusal they get when not (`StorageStatus`, `Server+StorageHealth`).
    var storage: StorageStatus
    /// When the next group commit may start (`GroupCommitCadence`, `Server+GroupCommit`).
    var groupCommit: GroupCommitCadence
    /// When quiet connections get a heartbeat and silent ones are closed (`IdleSweep`, `Server+Liveness`).
    var idleSweep: IdleSweep
    /// Input that waits for the next check phase: resumed connections' held lines, requests behind the expiry
    /// backlog (`HeldInput`, `Server+Expiry`).
    var heldInput: HeldInput
    /// What new connections must have done by when: first request, login, TLS handshake (`ConnectionDeadlines`).
    var deadlines = ConnectionDeadlines()
    /// The HTTP API's outstanding stream tickets (`StreamTickets`, `Server+HTTPAPI`).
    var streamTickets = StreamTickets()
    /// The sessions of this server's connections (`SessionTable`, `Server+Presence`): node-local, stored with the
    /// group commit.
    var sessions = SessionTable(recordsChanges: false)
    /// Each user's rules compiled once, shared by the user's connections (`CompiledPolicies`).
    var compiledPolicies = CompiledPolicies()
    /// The log lines a flood could repeat, at most one a second per kind (`RateLimitedLog`).
    var rateLimitedLog = RateLimitedLog()
    /// Gives memory back to the system after a burst (`HeapTrimmer`).
    var heapTrimmer = HeapTrimmer()
    /// The requests and loop iterations that took at least `--slow-request` (`SlowLog`, `Server+SlowLog`).
    var slowLog: SlowLog
    /// The backup being taken over the network (`BackupTransfers`, `Server+Backup`).
    var backups = BackupTransfers()
    /// The compaction in progress and the automatic vacuum (`SpaceReclaimer`, `Server+Compaction`).
    var reclaimer = SpaceReclaimer()
    /// Cluster mode's own state and threads (`ClusterNode`, `Server+Cluster`); nil on a single node, and then no
    /// cluster code runs on any request path.
    let clusterNode: ClusterNode?
    /// `clusterNode`'s replicator, which most cluster code reads (nil on a single node).
    var cluster: ClusterReplicator? { clusterNode?.replicator }

    /// The listener `role` made, if any.
    func listener(_ role: ListenerRole) -> Listener? { listeners.first { $0.role == role } }
    /// The port the plaintext listener bound (useful with port 0); 0 without one.
    public var port: Int { (listener(.plain) as? TCPListener)?.port ?? 0 }
    /// "127.0.0.1:7420"; "?" without a plaintext listener.
    public var address: String { listener(.plain)?.addressDescription ?? "?" }
    /// The port the TLS listener bound; 0 without one.
    public var tlsPort: Int { (listener(.tls) as? TCPListener)?.port ?? 0 }
    /// The TLS listener's address; nil without one.
    public var tlsAddress: String? { listener(.tls)?.addressDescription }
    /// The port the HTTP listener bound; 0 without one.
    public var httpPort: Int { (listener(.http) as? TCPListener)?.port ?? 0 }
    /// The HTTP listener's address; nil without one.
    public var httpAddress: String? { listener(.http)?.addressDescription }
    /// The Unix socket listener's address ("unix:PATH"); nil without one.
    public var unixAddress: String? { listener(.unix)?.addressDescription }
    /// The engine (loop thread only; for tests and tools running in-process).
    package var engine: KVOEngine { handler.engine }
    /// Open connections.
    public var connectionCount: Int { openConnections }

    /// Opens the store and restores the engine and the users from it (`ServerStartup`), creates the loop and
    /// binds the listener, so the port is known before `run()`.
    public init(configuration: ServerConfiguration) throws(ServerStartError) {
        self.configuration = configuration
        slowLog = SlowLog(thresholdNanoseconds: configuration.slowRequestNanoseconds)
        if let problem = configuration.sizeLimits.problem(outputBufferBytes: configuration.maximumOutputBufferBytes) {
            throw .configuration(problem)
        }
        let startup = try ServerStartup(configuration: configuration)
        let engine = startup.engine
        let appliedSequence = startup.appliedSequence
        let bootstrapSnapshot = startup.bootstrapSnapshot
        store = startup.store
        storage = StorageStatus(keepsWrites: startup.store.keepsWrites)
        metrics.buildCommit = configuration.buildCommit
        metrics.storageUsage = { [store] in
            store.usage().map {
                StorageUsageGauges(databaseBytes: $0.databaseBytes, walBytes: $0.walBytes, freeBytes: $0.freeBytes,
                                   sizeBytes: $0.sizeBytes)
            }
        }
        // A copy a stop (or a crash) left mid-transfer: never a backup, and nobody will read it.
        if let files = store.backupFiles { unlink(files.partial) }
        usersFileLock = startup.usersFileLock
        users = startup.users
        self.handler = RequestHandler(engine: engine)
        handler.users = users
        let clock = configuration.clock ?? .system()
        do throws(TransportError) {
            self.loop = try EventLoop(clock: clock)
        } catch {
            throw .transport(error)
        }
        self.clock = clock
        if !clock.isManual { clock.attach(to: loop.raw) }
        startedAt = (clock.milliseconds, clock.wallMilliseconds)
        (store as? SQLiteStore)?.clock = clock
        clusterNode = configuration.cluster.map {
            ClusterNode($0, appliedSequence: appliedSequence, integrity: startup.streamIntegrity)
        }
        if let replicator = clusterNode?.replicator, let node = configuration.cluster?.node {
            handler.clusterStatus = { [unowned replicator] in
                ClusterStatus(node: node, applied: replicator.appliedSequence, snapshot: bootstrapSnapshot,
                              chain: replicator.integrity.state.knowsChain ? replicator.integrity.chainHex : "",
                              health: replicator.health.reason, peers: replicator.integrity.peers)
            }
        }
        checkHandle = allocateHandle(uv_check_t.self, kind: UV_CHECK)
        heldInput = HeldInput()
        idleSweep = IdleSweep(seconds: configuration.idleTimeout)
        housekeepingHandle = allocateHandle(uv_timer_t.self, kind: UV_TIMER)
        groupCommit = GroupCommitCadence(intervalNanoseconds: storage.keepsWrites && configuration.cluster == nil
            ? UInt64(max(0, configuration.storage?.groupCommitIntervalMicroseconds ?? 0)) * 1000 : 0)
        asyncHandle = allocateHandle(uv_async_t.self, kind: UV_ASYNC)
        stopHandle = StopHandle(asyncHandle)
        passwordChecks = PasswordVerificationQueue(
            loop: loop.raw, clock: clock, concurrency: configuration.passwordCheckConcurrency,
            capacity: configuration.passwordCheckQueueLimit) { [unowned self] verification in
            self.passwordCheckFinished(verification)
        }
        startOwnHandles()
        restoreSessions(startup.sessions)
        replacedSessions(startup.replacedSessionIDs)
        if cluster != nil {
            // Sessions are replicated state in a cluster: `digest` covers them.
            handler.replicatedSessions = { [unowned self] in self.replicatedSessionRecords }
        }
        checkStorageAtStart()
        // An object whose ttl ended while kvod was stopped is gone (and committed) before anything can read it. A
        // cluster node first applies the stream from where it stopped; its requests' check does the rest.
        if cluster == nil { expireDueObjects(limit: .max) }
        try startListening()
        if !users.isEmpty {
            configuration.logger.info("authentication required", metadata: ["users": "\(users.count)"])
            // Made now (once, about as long as a password check) rather than by the first unknown
            // user's check, which would then take twice as long as a wrong password's.
            _ = PasswordHasher.dummyHash
        }
        // A binding runs with its creator's current rules; one made in open mode (no creator user)
        // runs unrestricted only while the server is in open mode (no users), and stops otherwise.
        engine.creatorPolicy = { [unowned self] user in
            guard let user else { return self.users.isEmpty ? .unrestricted : nil }
            return self.policy(ofUser: user)
        }
        handler.metricsText = { [unowned self] in self.renderMetrics() }
        handler.statusReport = { [unowned self] in self.statusReport() }
        handler.configurationReport = { [unowned self] in self.configurationReport() }
        if configuration.handlesSignals { installSignalHandlers() }
    }

    /// Serves until stopped (a signal, `stop()` or `stopHandle.requestStop()`), then closes every
    /// handle and the loop. Call once, on the thread that is to own the server.
    public func run() -> ShutdownReport {
        // A peer that vanishes mid-write must give EPIPE, not kill the process.
        signal(SIGPIPE, SIG_IGN)
        for (index, listener) in listeners.enumerated() {
            let what = switch listener.role {
            case .plain: "listening"
            case .tls: "listening for TLS"
            case .http: "listening for HTTP and WebSocket"
            case .unix: "listening on a Unix socket"
            }
            var metadata: Logger.Metadata = ["address": "\(listener.addressDescription)"]
            // The first line says which kvod this is (`KVODVersion`, the one place the version is written).
            if index == 0 {
                metadata["version"] = "\(KVODVersion.version)"
                metadata["commit"] = "\(configuration.buildCommit)"
                metadata["pid"] = "\(getpid())"
            }
            logger.info("\(what)", metadata: metadata)
        }
        if let clusterNode {
            let cluster = clusterNode.replicator
            logger.info("cluster node", metadata: [
                "node": "\(cluster.configuration.node)", "stream": "\(cluster.configuration.stream)",
                "nats": "\(cluster.configuration.servers.joined(separator: ","))", "applied": "\(cluster.appliedSequence)",
            ])
            clusterNode.start()
        }
        loop.run()
        closeStore()
        let status = loop.close()
        if status == 0 {
            logger.info("stopped; event loop closed cleanly")
            return ShutdownReport(loopClosedCleanly: true, leakedHandles: [])
        }
        let leaked = loop.openHandles()
        logger.error("event loop did not close: \(uvErrorDescription(status))",
                     metadata: ["handles": "\(leaked.joined(separator: ", "))"])
        return ShutdownReport(loopClosedCleanly: false, leakedHandles: leaked)
    }

    /// Stops accepting, closes every connection and handle; `run()` then returns. Loop thread.
    public func stop() {
        precondition(loop.isOnLoopThread, "Server.stop() must be called on the loop thread")
        guard !isStopping else { return }
        isStopping = true
        rateLimitedLog.reportHeldBack(at: nil, logger: logger)
        passwordChecks.cancelAllWaiting()
        logger.info("stopping", metadata: ["connections": "\(openConnections)"])
        rateLimitedLog.reportHeldBackDescriptorRefusals(logger: logger)
        commitPendingWrites()
        closeListeners()
        for connection in slots.compactMap({ $0?.takeUnretainedValue() }) {
            connection.close(reason: .serverStopping)
        }
        closeOwnHandles()
    }

    func closeOwnHandles() {
        stopHandle.invalidate()
        clusterNode?.close(logger: logger)
        closeHandle(asyncHandle)
        closeHandle(checkHandle)
        closeHandle(heldInput.idleHandle)
        closeHandle(housekeepingHandle)
        closeHandle(groupCommit.timer)
        for handle in signalHandles { closeHandle(handle) }
        signalHandles.removeAll()
    }
}
