import CLibUV
import KVOJSON
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
public final class Server {
    public let configuration: ServerConfiguration
    private var logger: Logger { configuration.logger }
    private let loop: EventLoop
    private var listener: TCPListener?
    /// The TLS listener (`--tls-port`), when configured.
    private var tlsListener: TCPListener?
    /// The HTTP listener (`--http-port`: WebSocket, metrics, health), when configured.
    private var httpListener: TCPListener?
    /// The Host and Origin rules of `httpListener`, made when it is bound. Loop thread.
    private var httpHostCheck: HTTPHostCheck?
    /// The TLS context new TLS connections start from; replaced by `reloadTLS()`, while open connections
    /// keep the one they started with.
    private var tlsContext: TLSContext?
    /// TLS connections' handshake deadlines (`--tls-handshake-timeout`), in accept order.
    private var tlsHandshakeDeadlines = FirstRequestDeadlines()
    private let handler: RequestHandler
    /// Open connections by slot (`ConnectionID.slot`): delivering an event finds its connection by
    /// array index, not by hashing. Freed slots are reused.
    /// Unretained: a connection is kept alive by its handle (`handle->data`) until its close
    /// callback, and leaves its slot when it starts closing, so every entry here is alive.
    @exclusivity(unchecked) private var slots: [Unmanaged<Connection>?] = []
    /// One notification's encoded tails, back to back, reused (no allocation per notification once
    /// warm). `tailStarts[v]..<tailEnds[v]` is variant v's tail (`EventEncoder.variant(for:)`).
    @exclusivity(unchecked) private var tailArena: [UInt8] = []
    @exclusivity(unchecked) private var tailStarts = [Int](repeating: 0, count: EventEncoder.variantCount)
    @exclusivity(unchecked) private var tailEnds = [Int](repeating: 0, count: EventEncoder.variantCount)
    private var freeSlots: [UInt32] = []
    private var openConnections = 0
    private var lastConnectionID: UInt64 = 0
    /// Connections with output to write at the end of this iteration.
    private var flushQueue: [Connection] = []
    /// The queue being flushed (swapped with `flushQueue`, so neither is reallocated per flush).
    private var flushing: [Connection] = []
    /// Event bytes queued since the last flush, for `flushEarlyIfOutputIsLarge()`.
    private var eventBytesSinceFlush = 0
    private let checkHandle: UnsafeMutablePointer<uv_check_t>
    /// Connections resumed with lines held from before their pause (`Connection.replayHeldInput()`),
    /// handed out at the start of the next check phase, when no request is being handled.
    private var heldInputQueue: [Connection] = []
    /// Active while `heldInputQueue` is not empty, so that the loop polls without blocking and the
    /// check phase comes round at once.
    private let replayIdleHandle: UnsafeMutablePointer<uv_idle_t>
    /// Fires every `housekeepingInterval`: closes connections past their first-request deadline and
    /// gives memory back after a burst. Never on the request path.
    private let housekeepingHandle: UnsafeMutablePointer<uv_timer_t>
    /// New connections' first-request deadlines, in accept order.
    private var firstRequestDeadlines = FirstRequestDeadlines()
    /// With users defined, new connections' login deadlines (`--login-timeout`), in accept order.
    private var loginDeadlines = FirstRequestDeadlines()
    /// One per `CloseReason.rateLimitSlot`: noteworthy closings are logged at most once a second per
    /// kind, the rest counted, so that a client opening many connections cannot flood the log.
    private var closingLogLimits = [RateLimitedCount](repeating: RateLimitedCount(), count: CloseReason.rateLimitSlots)
    private var heapTrimmer = HeapTrimmer()
    /// The most bytes of unfinished lines held since the last trim (output has the pool's peak).
    private var peakBufferedInputBytes = 0
    private let asyncHandle: UnsafeMutablePointer<uv_async_t>
    private var signalHandles: [UnsafeMutablePointer<uv_signal_t>] = []
    private var isStopping = false
    /// Connections that fit under the descriptor limit (`DescriptorLimit`), read at start-up; a
    /// connection past it is refused, before libuv's accept runs out of descriptors and drops
    /// connections silently.
    private let descriptorCapacity = DescriptorLimit.current().connectionCapacity
    /// Connections refused for want of descriptors, logged once a second at most.
    private var descriptorRefusals = RateLimitedCount()
    /// The durable store, when not in memory. Written once per loop iteration (group commit).
    private let store: PersistentStore?
    /// The store's background checkpoint (a second SQLite connection used on the thread pool: see
    /// `WALCheckpointJob` for which thread owns it when); nil in memory. Queued by `commitPendingWrites()`.
    private let checkpointJob: WALCheckpointJob?
    /// Blocking checkpoints (the WAL past `--wal-limit`), logged at most once a second, the rest counted.
    private var blockingCheckpointLog = RateLimitedCount()
    /// Scratch space reused by every request (no allocation per request once warm).
    private var notifications: [ChangeNotification] = []
    private var replyBuffer: [UInt8] = []
    /// The users; when there are any, connections must `auth` before anything but `hello` and `ping`.
    private let users: UserDirectory
    /// Cluster mode with a store: users changed by stream entries applied since the last group commit,
    /// written with it (`persistUsers`). Loop thread.
    private var uncommittedUsers = Set<String>()
    /// `--users FILE` (no store): the file's lock, held shared for the whole run (`UsersFileLock`).
    private var usersFileLock: UsersFileLock?
    /// Password checks, on the thread pool (set once the loop exists).
    private var passwordChecks: PasswordVerificationQueue!
    /// Failed logins are logged at most once a second, the rest counted.
    private var authenticationFailureLog = RateLimitedCount()
    /// Cluster mode: the writes waiting for the stream and the sequence applied (nil: a single node, and
    /// then no cluster code runs on any request path).
    private let cluster: ClusterReplicator?
    /// Cluster mode: the NATS bridge (its own threads) and the queue it hands stream messages back on,
    /// drained by `clusterAsyncHandle`.
    private let clusterBridge: NATSBridge?
    private let clusterInbox: BridgeInbox?
    private let clusterAsyncHandle: UnsafeMutablePointer<uv_async_t>?
    /// Cluster mode with `--cluster-snapshot-every` above 0: publishes this node's snapshots (its own thread).
    private let snapshotPublisher: SnapshotPublisher?
    /// Cluster mode: reads and observes waiting for their `atLeastRev`.
    private var revisionWaits = RevisionWaits()
    /// Cluster mode: each connection's writes in flight and the request held behind them.
    private var pipelinedWrites = PipelinedWrites()

    /// Stops the server from any thread.
    public let stopHandle: StopHandle
    /// Counters and histograms for `GET /metrics` (loop thread only).
    let metrics = ServerMetrics()

    /// Each user's rules compiled (`AccessPolicy`), made at the first login or binding application
    /// that needs them and kept until `policyDidChange(forUser:)`: rules are compiled once per user,
    /// and every connection of the user shares the one policy. Loop thread only.
    private var compiledPolicies: [String: AccessPolicy] = [:]

    /// The port the plaintext listener bound (useful with port 0); 0 without one.
    public var port: Int { listener?.port ?? 0 }
    /// "127.0.0.1:7420"; "?" without a plaintext listener.
    public var address: String { listener?.addressDescription ?? "?" }
    /// The port the TLS listener bound; 0 without one.
    public var tlsPort: Int { tlsListener?.port ?? 0 }
    /// The TLS listener's address; nil without one.
    public var tlsAddress: String? { tlsListener?.addressDescription }
    /// The HTTP listener's address; nil without one.
    public var httpAddress: String? { httpListener?.addressDescription }
    /// The engine (loop thread only; for tests and tools running in-process).
    public var engine: KVOEngine { handler.engine }
    /// Open connections.
    public var connectionCount: Int { openConnections }

    /// Opens the store (when configured) and restores the engine from it, creates the loop and binds
    /// the listener, so the port is known before `run()`.
    public init(configuration: ServerConfiguration) throws(ServerStartError) {
        self.configuration = configuration
        if let problem = configuration.sizeLimits.problem(outputBufferBytes: configuration.maximumOutputBufferBytes) {
            throw .configuration(problem)
        }
        var engine: KVOEngine
        var users = UserDirectory()
        var appliedSequence: UInt64 = 0
        /// The stream sequence of the snapshot this node installed at start-up (`SnapshotBootstrap`), if any.
        var bootstrapSnapshot: UInt64?
        /// The users of that snapshot (nil: none installed, or a snapshot older than replicated users).
        var snapshotUsers: [UserRecord]?
        var directoryProblem: String?
        if let cluster = configuration.cluster, let problem = cluster.problem { throw .configuration(problem) }
        if let storage = configuration.storage {
            do throws(StorageError) {
                let store = try PersistentStore(directory: storage.directory, sync: storage.sync,
                                                historyLimit: configuration.historyLimit,
                                                historyByteLimit: configuration.historyByteLimit,
                                                walLimitBytes: storage.walLimitBytes)
                checkpointJob = try store.makeCheckpointJob(delayMilliseconds: storage.checkpointTestDelayMilliseconds)
                var state = try store.load()
                users = try store.loadUsers()
                let recordedStream = try store.readClusterStream()
                directoryProblem = Server.clusterDirectoryProblem(recorded: recordedStream, cluster: configuration.cluster,
                                                                  revision: state.revision, classes: state.classes.count)
                if let cluster = configuration.cluster, directoryProblem == nil {
                    if recordedStream == nil { try store.recordClusterStream(cluster.stream) }
                    appliedSequence = try store.readStreamSequence()
                    switch Server.bootstrap(cluster, applied: appliedSequence, logger: configuration.logger) {
                    case .replay: break
                    case let .install(snapshot):
                        try store.replaceAll(with: snapshot.persistedState, streamSequence: snapshot.sequence, users: snapshot.users)
                        state = snapshot.persistedState
                        snapshotUsers = snapshot.users
                        appliedSequence = snapshot.sequence
                        bootstrapSnapshot = snapshot.sequence
                    case let .refuse(reason):
                        directoryProblem = reason
                    }
                }
                engine = KVOEngine(restoring: state, historyLimit: configuration.historyLimit,
                                   historyByteLimit: configuration.historyByteLimit, recordsCommitBatches: true)
                self.store = store
                for note in store.permissionNotes { configuration.logger.warning("\(PrintableText.escaped(note, limit: 1000))") }
                configuration.logger.info("restored", metadata: [
                    "objects": "\(state.objects.count)", "rev": "\(state.revision)", "history": "\(state.history.count)",
                    "classes": "\(state.classes.count)", "bindings": "\(state.bindings.count)",
                    "database": "\(store.databasePath)", "sync": "\(storage.sync.rawValue)", "storedBytes": "\(engine.storedBytes)",
                ])
                for problem in engine.restoreProblems {
                    configuration.logger.error("\(PrintableText.escaped("\(problem)", limit: 1000))")
                }
            } catch {
                throw .storage(error)
            }
            if let directoryProblem { throw .configuration(directoryProblem) }
        } else {
            engine = KVOEngine(historyLimit: configuration.historyLimit, historyByteLimit: configuration.historyByteLimit)
            self.store = nil
            checkpointJob = nil
        }
        if configuration.storage == nil, let cluster = configuration.cluster {
            switch Server.bootstrap(cluster, applied: 0, logger: configuration.logger) {
            case .replay: break
            case let .install(snapshot):
                engine = KVOEngine(restoring: snapshot.persistedState, historyLimit: configuration.historyLimit,
                                   historyByteLimit: configuration.historyByteLimit, recordsCommitBatches: false)
                appliedSequence = snapshot.sequence
                bootstrapSnapshot = snapshot.sequence
                snapshotUsers = snapshot.users
            case let .refuse(reason):
                throw .configuration(reason)
            }
        }
        if bootstrapSnapshot != nil, let problem = engine.restoreProblems.first {
            throw .configuration("the cluster snapshot could not be installed whole (\(problem)): this node would diverge")
        }
        if configuration.storage == nil, let usersFile = configuration.usersFile {
            do throws(UserDirectoryError) {
                // Held for the whole run: `kvod user … --users FILE` refuses to change it meanwhile.
                guard let lock = try UsersFileLock(usersFile: usersFile, mode: .serving) else {
                    throw UserDirectoryError("the users file '\(usersFile)' is being changed by `kvod user …`: try again")
                }
                usersFileLock = lock
                users = try UsersFile.load(usersFile)
            } catch {
                throw .configuration(error.message)
            }
        }
        // A snapshot's users are the cluster's at its sequence: they replace what the node started with.
        if let snapshotUsers { users = UserDirectory(snapshotUsers) }
        self.users = users
        engine.sizeLimits = configuration.sizeLimits
        engine.maximumObservationsPerConnection = configuration.maximumObservationsPerConnection
        if engine.storedBytes > configuration.sizeLimits.maximumStoredBytes {
            configuration.logger.warning("""
                the store holds \(engine.storedBytes) bytes, more than --max-memory \(configuration.sizeLimits.maximumStoredBytes): \
                writes that would grow it are refused (quota_exceeded) until enough is deleted
                """)
        }
        self.handler = RequestHandler(engine: engine)
        handler.users = users
        do throws(TransportError) {
            self.loop = try EventLoop()
        } catch {
            throw .transport(error)
        }
        if let clusterConfiguration = configuration.cluster {
            let replicator = ClusterReplicator(configuration: clusterConfiguration, appliedSequence: appliedSequence)
            let handle = allocateHandle(uv_async_t.self, kind: UV_ASYNC)
            let inbox = BridgeInbox(handle)
            cluster = replicator
            clusterAsyncHandle = handle
            clusterInbox = inbox
            clusterBridge = NATSBridge(configuration: clusterConfiguration, inbox: inbox, startSequence: appliedSequence + 1)
            snapshotPublisher = clusterConfiguration.snapshotEvery > 0
                ? SnapshotPublisher(configuration: clusterConfiguration, inbox: inbox) : nil
            let node = clusterConfiguration.node
            handler.clusterStatus = { [unowned replicator] in (node, replicator.appliedSequence, bootstrapSnapshot) }
        } else {
            cluster = nil
            clusterAsyncHandle = nil
            clusterInbox = nil
            clusterBridge = nil
            snapshotPublisher = nil
        }
        checkHandle = allocateHandle(uv_check_t.self, kind: UV_CHECK)
        replayIdleHandle = allocateHandle(uv_idle_t.self, kind: UV_IDLE)
        housekeepingHandle = allocateHandle(uv_timer_t.self, kind: UV_TIMER)
        asyncHandle = allocateHandle(uv_async_t.self, kind: UV_ASYNC)
        stopHandle = StopHandle(asyncHandle)
        uv_check_init(loop.raw, checkHandle)
        uv_idle_init(loop.raw, replayIdleHandle)
        retainOwner(self, in: replayIdleHandle)
        uv_async_init(loop.raw, asyncHandle, Server.asyncCallback)
        if let clusterAsyncHandle {
            uv_async_init(loop.raw, clusterAsyncHandle, Server.clusterCallback)
            retainOwner(self, in: clusterAsyncHandle)
        }
        retainOwner(self, in: checkHandle)
        retainOwner(self, in: asyncHandle)
        uv_check_start(checkHandle, Server.checkCallback)
        uv_timer_init(loop.raw, housekeepingHandle)
        retainOwner(self, in: housekeepingHandle)
        uv_timer_start(housekeepingHandle, Server.housekeepingCallback, Server.housekeepingInterval, Server.housekeepingInterval)
        passwordChecks = PasswordVerificationQueue(
            loop: loop.raw, concurrency: configuration.passwordCheckConcurrency,
            capacity: configuration.passwordCheckQueueLimit) { [unowned self] verification in
            self.passwordCheckFinished(verification)
        }
        do throws(ServerStartError) {
            if let tls = configuration.tls {
                do throws(TLSSetupError) {
                    tlsContext = try TLSContext(tls)
                } catch {
                    throw .tls(error)
                }
            }
            if configuration.http?.usesTLS == true, configuration.tls == nil {
                throw .configuration("the HTTP listener's TLS uses the TLS listener's certificate: set tls (--tls-port, --tls-cert, --tls-key)")
            }
            do throws(TransportError) {
                if configuration.listensForPlaintext {
                    listener = try TCPListener(loop: loop, host: configuration.host, port: configuration.port) {
                        [unowned self] listener, status in
                        self.accept(from: listener, status: status)
                    }
                }
                if let tls = configuration.tls {
                    tlsListener = try TCPListener(loop: loop, host: configuration.host, port: tls.port) {
                        [unowned self] listener, status in
                        self.accept(from: listener, status: status)
                    }
                }
                if let http = configuration.http {
                    let bound = try TCPListener(loop: loop, host: http.host, port: http.port) {
                        [unowned self] listener, status in
                        self.accept(from: listener, status: status)
                    }
                    httpListener = bound
                    httpHostCheck = HTTPHostCheck(configuration: http, boundAddress: bound.addressDescription, port: bound.port)
                }
            } catch {
                throw .transport(error)
            }
            guard listener != nil || tlsListener != nil || httpListener != nil else {
                throw .configuration("no listener: the plaintext port is off and neither a TLS nor an HTTP port is set")
            }
        } catch {
            listener?.close()
            tlsListener?.close()
            httpListener?.close()
            closeOwnHandles()
            loop.run()  // let the close callbacks run
            _ = loop.close()
            closeStore()
            throw error
        }
        if users.isEmpty, !configuration.allowsInsecureOpen,
           let exposed = [listener, tlsListener, httpListener].compactMap({ $0 }).first(where: { !$0.isLoopback }) {
            let address = exposed.addressDescription
            listener?.close()
            tlsListener?.close()
            httpListener?.close()
            self.listener = nil
            self.tlsListener = nil
            self.httpListener = nil
            closeOwnHandles()
            loop.run()
            _ = loop.close()
            closeStore()
            throw .configuration("""
                refusing to serve \(address) with no users defined (anyone who can connect could read and change \
                everything): add a user with `kvod user add`, listen on 127.0.0.1, or pass --insecure-open
                """)
        }
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
        if configuration.handlesSignals {
            // A parent may have left these blocked (process launchers often do): unblock them, or
            // the handlers below would never run.
            var unblock = sigset_t()
            sigemptyset(&unblock)
            sigaddset(&unblock, SIGINT)
            sigaddset(&unblock, SIGTERM)
            sigaddset(&unblock, SIGHUP)
            pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
            // SIGHUP reloads the TLS certificate, key and CA (only with a TLS listener).
            for signal in configuration.tls == nil ? [SIGINT, SIGTERM] : [SIGINT, SIGTERM, SIGHUP] {
                let handle = allocateHandle(uv_signal_t.self, kind: UV_SIGNAL)
                uv_signal_init(loop.raw, handle)
                retainOwner(self, in: handle)
                uv_signal_start(handle, Server.signalCallback, signal)
                signalHandles.append(handle)
            }
        }
    }

    /// Serves until stopped (a signal, `stop()` or `stopHandle.requestStop()`), then closes every
    /// handle and the loop. Call once, on the thread that is to own the server.
    public func run() -> ShutdownReport {
        // A peer that vanishes mid-write must give EPIPE, not kill the process.
        signal(SIGPIPE, SIG_IGN)
        if listener != nil { logger.info("listening", metadata: ["address": "\(address)"]) }
        if let tlsAddress { logger.info("listening for TLS", metadata: ["address": "\(tlsAddress)"]) }
        if let httpAddress { logger.info("listening for HTTP and WebSocket", metadata: ["address": "\(httpAddress)"]) }
        if let cluster, let clusterBridge {
            logger.info("cluster node", metadata: [
                "node": "\(cluster.configuration.node)", "stream": "\(cluster.configuration.stream)",
                "nats": "\(cluster.configuration.servers.joined(separator: ","))", "applied": "\(cluster.appliedSequence)",
            ])
            clusterBridge.start()
            snapshotPublisher?.start()
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
        for slot in closingLogLimits.indices {
            if let count = closingLogLimits[slot].takeUnreported() { logSuppressedClosings(count, slot: slot) }
        }
        if let count = authenticationFailureLog.takeUnreported() { logSuppressedAuthenticationFailures(count) }
        passwordChecks.cancelAllWaiting()
        logger.info("stopping", metadata: ["connections": "\(openConnections)"])
        if let unreported = descriptorRefusals.takeUnreported() {
            logger.warning("refused \(unreported) more connection\(unreported == 1 ? "" : "s") for want of file descriptors")
        }
        commitPendingWrites()
        listener?.close()
        tlsListener?.close()
        httpListener?.close()
        for connection in slots.compactMap({ $0?.takeUnretainedValue() }) {
            connection.close(reason: .serverStopping)
        }
        closeOwnHandles()
    }

    private func closeOwnHandles() {
        stopHandle.invalidate()
        if let clusterAsyncHandle, let clusterInbox, let clusterBridge {
            clusterInbox.invalidate()
            clusterBridge.stop()
            snapshotPublisher?.stop()
            closeHandle(clusterAsyncHandle)
        }
        closeHandle(asyncHandle)
        closeHandle(checkHandle)
        closeHandle(replayIdleHandle)
        closeHandle(housekeepingHandle)
        for handle in signalHandles { closeHandle(handle) }
        signalHandles.removeAll()
    }

    // MARK: - Accepting

    private func accept(from listener: TCPListener, status: Int32) {
        guard status == 0 else {
            if status == UV_EMFILE.rawValue || status == UV_ENFILE.rawValue {
                logRefusalForDescriptors(uvErrorDescription(status))
            } else {
                logger.warning("accept failed: \(uvErrorDescription(status))")
            }
            return
        }
        lastConnectionID += 1
        let slot = freeSlots.popLast() ?? {
            slots.append(nil)
            return UInt32(slots.count - 1)
        }()
        let connection = Connection(
            id: ConnectionID(lastConnectionID, slot: slot), loop: loop.raw, delegate: self,
            maximumLineLength: configuration.maximumLineLength,
            maximumOutputBytes: configuration.maximumOutputBufferBytes,
            maximumTotalInputBytes: configuration.maximumTotalInputBytes,
            maximumPendingReplies: configuration.maximumPendingRequests,
            tls: listener === tlsListener || (listener === httpListener && configuration.http?.usesTLS == true) ? tlsContext : nil,
            http: listener === httpListener ? HTTPRequestParser.Limits() : nil)
        let acceptStatus = uv_accept(asStream(listener.handle), asStream(connection.handle))
        slots[Int(slot)] = Unmanaged.passUnretained(connection)
        openConnections += 1
        metrics.connectionOpened(Server.metricsTransport(of: connection))
        guard acceptStatus == 0 else {
            connection.close(reason: .socketError("accept: \(uvErrorDescription(acceptStatus))"))
            return
        }
        let tooMany = openConnections > configuration.maximumConnections
        // With users defined, nothing but hello, auth and ping until the connection logs in.
        connection.principal = users.isEmpty ? .open : nil
        let startStatus = connection.start()
        guard startStatus == 0 else {
            connection.close(reason: .socketError("read start: \(uvErrorDescription(startStatus))"))
            return
        }
        // Before the refusals below: a refused TLS connection's reply waits for its handshake, which must
        // not wait for ever.
        if connection.isTLS, let seconds = configuration.tls?.handshakeTimeout, seconds > 0 {
            tlsHandshakeDeadlines.add(connection.id, deadline: uv_now(loop.raw) &+ UInt64(seconds * 1000))
        }
        if tooMany, connection.isHTTP {
            connection.sendHTTPResponse(
                HTTPResponse.text(.serviceUnavailable, "the server is at its limit of \(configuration.maximumConnections) connections",
                                  keepAlive: false),
                keepAlive: false, reason: .rejected("over --max-connections"))
            return
        }
        if tooMany {
            let error = KVOError(.tooManyConnections,
                                 "the server is at its limit of \(configuration.maximumConnections) connections")
            var bytes: [UInt8] = []
            ReplyEncoder.failure(id: nil, error: error, into: &bytes)
            connection.sendAndClose(bytes, reason: .rejected(error.message))
            return
        }
        if openConnections > descriptorCapacity {
            let error = KVOError(.tooManyConnections,
                                 "the server is out of file descriptors (\(descriptorCapacity) connections fit its limit)")
            var bytes: [UInt8] = []
            ReplyEncoder.failure(id: nil, error: error, into: &bytes)
            connection.sendAndClose(bytes, reason: .outOfDescriptors)
            logRefusalForDescriptors("\(openConnections - 1) connections open, room for \(descriptorCapacity)")
            return
        }
        if configuration.firstRequestTimeout > 0 {
            let timeout = UInt64(configuration.firstRequestTimeout * 1000)
            firstRequestDeadlines.add(connection.id, deadline: uv_now(loop.raw) &+ timeout)
        }
        // An HTTP connection needs a login only once it upgrades to WebSocket.
        if connection.principal == nil, !connection.isHTTP { addLoginDeadline(for: connection) }
        logger.debug("connection opened", metadata: ["connection": "\(connection.id)", "peer": "\(connection.peer)"])
    }

    /// Logs connections refused for want of file descriptors, one line a second at most with the
    /// count since the last line (a flood of connections must not flood the log as well).
    private func logRefusalForDescriptors(_ detail: String) {
        guard let count = descriptorRefusals.record(at: uv_now(loop.raw)) else { return }
        let limit = DescriptorLimit.current()
        logger.warning("""
            refused \(count) connection\(count == 1 ? "" : "s") for want of file descriptors \
            (limit \(limit.soft), \(detail)): raise the limit (ulimit -n) or lower --max-connections
            """)
    }

    // MARK: - TLS

    /// Reads the TLS certificate, key and CA files again (SIGHUP). New TLS connections use the new
    /// context; open ones keep theirs. When the files cannot be loaded, the previous context stays and one
    /// error line says why. Returns whether it reloaded. Loop thread.
    @discardableResult
    public func reloadTLS() -> Bool {
        precondition(loop.isOnLoopThread, "Server.reloadTLS() must be called on the loop thread")
        guard let tls = configuration.tls else { return false }
        do throws(TLSSetupError) {
            tlsContext = try TLSContext(tls)
            logger.info("reloaded the TLS certificate and key", metadata: [
                "cert": "\(PrintableText.escaped(tls.certificatePath))", "key": "\(PrintableText.escaped(tls.privateKeyPath))",
            ])
            return true
        } catch {
            logger.error("TLS reload failed, still using the previous certificate and key: \(PrintableText.escaped("\(error)", limit: 1000))")
            return false
        }
    }

    // MARK: - Requests

    private func handleLine(_ line: UnsafeBufferPointer<UInt8>, from connection: Connection) {
        if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { return }
        connection.hasSentRequest = true
        // Before a login (users defined) only hello, auth and ping are looked at: docs/protocol.md.
        let decoded = connection.principal == nil ? RequestDecoder.decodeBeforeLogin(line) : RequestDecoder.decode(line)
        // Cluster mode: after writes in flight on this connection, only more writes go on at once (they join
        // the next batch); anything else waits until those writes are answered, to be answered after them.
        if cluster != nil, pipelinedWrites.count(of: connection.id) > 0, !Server.joinsPipeline(decoded, connection) {
            pipelinedWrites.hold(.line(Array(line)), for: connection.id)
            connection.pauseReading(.replication)
            return
        }
        let request: Request
        switch decoded.request {
        case let .success(value): request = value
        case let .failure(error):
            send(.failure(error), id: decoded.id, to: connection, counting: .invalid)
            return
        }
        switch request {
        case let .auth(credentials):
            authenticate(credentials, id: decoded.id, connection: connection)
            return
        case let .admin(adminRequest):
            guard connection.principal != nil else {
                send(.failure(Server.notAuthenticated), id: decoded.id, to: connection, counting: .admin)
                return
            }
            administer(adminRequest, id: decoded.id, connection: connection)
            return
        case .hello, .ping:
            break
        default:
            guard connection.principal != nil else {
                send(.failure(Server.notAuthenticated), id: decoded.id, to: connection, counting: MetricsOperation(request))
                return
            }
        }
        if let cluster, request.isWrite {
            submitToCluster(cluster, request, line: line, id: decoded.id, connection: connection)
            return
        }
        if let atLeastRev = decoded.atLeastRev, atLeastRev > handler.engine.revision {
            holdForRevision(atLeastRev, request, decoded: decoded, connection: connection)
            return
        }
        perform(request, id: decoded.id, valueText: decoded.valueText, connection: connection)
    }

    /// Whether a request is a write that may be submitted to the cluster behind this connection's writes in
    /// flight: a decoded write from a logged-in connection (anything else is answered in order after them).
    /// Not an admin operation: some are answered at once (`userList`, a refusal, a password being hashed
    /// first), so it waits for the writes before it and is then counted with them (`commit`).
    private static func joinsPipeline(_ decoded: RequestDecoder.Decoded, _ connection: Connection) -> Bool {
        guard connection.principal != nil, case let .success(request) = decoded.request else { return false }
        if case .admin = request { return false }
        return request.isWrite
    }

    /// Carries out a request that is not a cluster write, replies and delivers its events. Loop thread.
    private func perform(_ request: Request, id: JSONValue?, valueText: [UInt8]?, connection: Connection) {
        notifications.removeAll(keepingCapacity: true)
        let budget = ReplyBudget(outputLimit: configuration.maximumOutputBufferBytes, queued: connection.outputBytes,
                                 id: id)
        if case let .hello(_, events?) = request { connection.eventEncoding = events }
        let outcome = handler.handle(request, valueText: valueText, from: connection.id,
                                     access: connection.access, budget: budget,
                                     eventEncoding: connection.eventEncoding, notifications: &notifications)
        let operation = MetricsOperation(request)
        switch outcome.order {
        case .afterNotifications:
            deliverNotifications()
            deliverBindingEvents()
            send(outcome.reply, id: id, to: connection, counting: operation)
        case .beforeNotifications:
            send(outcome.reply, id: id, to: connection, counting: operation)
            deliverNotifications()
            deliverBindingEvents()
        }
    }

    // MARK: - Permission changes

    /// After `connection.principal` was replaced (a login, or its user's rules changed): its cached
    /// permission answers are already gone (`ConnectionAccess.replace`); this ends each of its live
    /// observations whose key path now passes through an object it may not read (a final `forbidden`
    /// event, no value), and stops the bindings its user created that the new rules no longer allow
    /// (their creators get the `binding` event, cause `forbidden`). In cluster mode bindings are not
    /// re-checked here: a login happens on one node, and stopping a binding there only would make the
    /// nodes differ (rules do not change online in cluster mode; every node re-checks them at each
    /// application, in stream order). Loop thread; not while a request of this server is being carried out.
    func principalDidChange(of connection: Connection) {
        var ended: [ChangeNotification] = []
        handler.engine.accessChanged(for: connection.id, notifications: &ended)
        if cluster == nil, let user = connection.access.user { handler.engine.recheckBindings(ofUser: user) }
        swap(&ended, &notifications)
        deliverNotifications()
        swap(&ended, &notifications)
        deliverBindingEvents()
    }

    /// Closes `connection` unless it has logged in within `--login-timeout` from now. One whose password
    /// is being checked when its time is up is left to that check (a failure counts toward the limit of 5).
    private func addLoginDeadline(for connection: Connection) {
        guard configuration.loginTimeout > 0 else { return }
        loginDeadlines.add(connection.id, deadline: uv_now(loop.raw) &+ UInt64(configuration.loginTimeout * 1000))
    }

    /// The first user was added online: open mode is over. Every connection that was let in without
    /// credentials (as new ones no longer are) must now log in: its principal goes, so it is answered
    /// `unauthenticated` until `auth`, and its observations end with a final `forbidden` event.
    private func endOpenMode() {
        var anonymous: [Connection] = []
        for case let entry? in slots {
            let connection = entry.takeUnretainedValue()
            if !connection.isClosing, let principal = connection.principal, principal.user == nil { anonymous.append(connection) }
        }
        for connection in anonymous {
            connection.principal = nil
            principalDidChange(of: connection)
            addLoginDeadline(for: connection)
        }
        logger.notice("authentication required from now on (the first user exists); \(anonymous.count) connection\(anonymous.count == 1 ? "" : "s") must log in")
    }

    /// `user`'s current rules, compiled once (nil: no such user). Loop thread.
    public func policy(ofUser user: String) -> AccessPolicy? {
        if let compiled = compiledPolicies[user] { return compiled }
        guard let record = users.user(named: user) else { return nil }
        let compiled = AccessPolicy(rules: record.rules)
        compiledPolicies[user] = compiled
        return compiled
    }

    /// After `user`'s rules changed in the user store (or the user was removed): compiles them again,
    /// gives every open connection acting for the user the new rules (none at all when the user is
    /// gone) and re-checks it (`principalDidChange(of:)`); the user's bindings are re-checked even when
    /// no connection of the user is open. O(open connections). Loop thread; for online grant, revoke
    /// and remove.
    public func policyDidChange(forUser user: String) {
        compiledPolicies[user] = nil
        let policy = self.policy(ofUser: user)
        for case let entry? in slots {
            let connection = entry.takeUnretainedValue()
            guard connection.principal?.user == user else { continue }
            connection.principal = Principal(user: user, policy: policy ?? ConnectionAccess.nobody.policy)
            principalDidChange(of: connection)
        }
        handler.engine.recheckBindings(ofUser: user)
        deliverBindingEvents()
    }

    // MARK: - Authentication

    /// The reply to any request but hello, auth and ping before a successful `auth`.
    private static let notAuthenticated = RequestDecoder.loginRequired
    /// The reply to wrong credentials, the same whether the user exists or not.
    private static let wrongCredentials = KVOError(.unauthenticated, "wrong user name or password")

    /// Starts checking a password on the thread pool; the connection's later requests wait for the
    /// answer (`Connection.pauseForVerification`). An unknown user is checked against a dummy hash of
    /// the users' most common cost, so that the answer takes as long and reads the same as for a wrong
    /// password.
    private func authenticate(_ credentials: AuthCredentials, id: JSONValue?, connection: Connection) {
        switch credentials {
        case let .password(userName, password):
            let user = users.user(named: userName)
            let verification = PasswordVerification(
                connection: connection.id, peerHost: Server.host(ofPeer: connection.peer), userName: userName,
                userExists: user != nil, requestID: id, connectionFailures: connection.authenticationFailures,
                sequence: passwordChecks.takeSequence(), hash: user?.passwordHash ?? users.unknownUserHash,
                password: password)
            connection.pauseReading(.verification)
            if let turnedAway = passwordChecks.submit(verification, now: uv_now(loop.raw)) {
                turnAway(turnedAway)
            }
        case let .token(text):
            // Cheap (a BLAKE2b hash of 32 bytes): checked here, on the loop thread.
            if let user = users.user(presentingToken: text) {
                logIn(connection, as: user, id: id)
            } else {
                authenticationFailed(connection, userName: nil, id: id)
                passwordChecks.peerFailures.recordFailure(of: Server.host(ofPeer: connection.peer), now: uv_now(loop.raw))
            }
        }
    }

    /// A check the full queue could not take: answered without a check (not counted as a failure).
    private func turnAway(_ verification: PasswordVerification) {
        verification.wipePassword()
        guard let connection = connection(verification.connection)?.takeUnretainedValue() else { return }
        let error = KVOError(.unauthenticated, "too many logins are waiting to be checked; try again shortly")
        send(.failure(error), id: verification.requestID, to: connection, counting: .auth)
        connection.resumeReading(.verification)
    }

    /// A password check is back (loop thread): log the connection in, or count a failure.
    private func passwordCheckFinished(_ verification: PasswordVerification) {
        guard let connection = connection(verification.connection)?.takeUnretainedValue(), !connection.isClosing else { return }
        // The user may have been removed, or its password changed, while the check ran.
        if verification.matched, let user = users.user(named: verification.userName),
           user.passwordHash == verification.checkedHash {
            logIn(connection, as: user, id: verification.requestID)
        } else {
            authenticationFailed(connection, userName: verification.userName, id: verification.requestID)
            passwordChecks.peerFailures.recordFailure(of: verification.peerHost, now: uv_now(loop.raw))
        }
        connection.resumeReading(.verification)
    }

    /// The connection now acts for `user`, with its rules compiled once here.
    private func logIn(_ connection: Connection, as user: UserRecord, id: JSONValue?) {
        connection.principal = Principal(user: user.name, policy: policy(ofUser: user.name) ?? AccessPolicy(rules: user.rules))
        send(.success([("user", .string(user.name))]), id: id, to: connection, counting: .auth)
        passwordChecks.recordSuccess(of: Server.host(ofPeer: connection.peer), now: uv_now(loop.raw))
        // A second login on a connection (as another user) re-checks what it observes.
        principalDidChange(of: connection)
        logger.debug("authenticated", metadata: [
            "connection": "\(connection.id)", "peer": "\(connection.peer)", "user": "\(user.name)",
        ])
    }

    /// Answers a failed `auth` (`unauthenticated`, the same reply whatever was wrong), logs it
    /// (rate-limited) and closes the connection at the failure limit.
    private func authenticationFailed(_ connection: Connection, userName: String?, id: JSONValue?) {
        connection.authenticationFailures += 1
        metrics.countRequest(.auth, error: .unauthenticated)
        if let count = authenticationFailureLog.record(at: uv_now(loop.raw)) {
            let others = count > 1 ? " (and \(count - 1) more since the last line)" : ""
            let who = userName.map { "user '\(PrintableText.escaped($0, limit: 64))'" } ?? "an API token"
            logger.warning("authentication failed for \(who) from \(connection.peer)\(others)",
                           metadata: ["connection": "\(connection.id)"])
        }
        Server.empty(&replyBuffer)
        ReplyEncoder.failure(id: id, error: Server.wrongCredentials, into: &replyBuffer)
        if connection.authenticationFailures >= configuration.maximumAuthenticationFailures {
            connection.sendAndClose(replyBuffer, reason: .authenticationFailures(connection.authenticationFailures))
        } else {
            connection.enqueue(replyBuffer)
        }
    }

    // MARK: - Managing users online

    /// An admin operation: needs `isServerAdmin`. `userList` is answered from this node's users; every
    /// other operation becomes a `UserChange` (a new password is hashed on the thread pool first, the
    /// connection waiting for it as for a password check; a new token is made here) and is carried out
    /// by `commit(_:tokenText:id:connection:)`.
    private func administer(_ request: AdminRequest, id: JSONValue?, connection: Connection) {
        guard connection.principal?.policy.isServerAdmin == true else {
            send(.failure(KVOError(.forbidden, "user management needs admin on every object (a rule '*=admin')")), id: id, to: connection, counting: .admin)
            return
        }
        switch request {
        case .userList:
            let list = users.users.map { user in
                JSONValue.object(["name": .string(user.name), "rules": .array(user.rules.map(\.json)),
                                  "tokens": .array(user.tokens.map { .string($0.id) })])
            }
            send(.success([("users", .array(list))]), id: id, to: connection, counting: .admin)
        case let .userAdd(name, password, rules, cost):
            // Checked before the slow hash; the change itself decides again when it is applied.
            guard users.user(named: name) == nil else {
                send(.failure(KVOError(.exists, "user '\(name)' exists already")), id: id, to: connection, counting: .admin)
                return
            }
            hashThenCommit(password: password, cost: cost, id: id, connection: connection) { .add(user: name, passwordHash: $0, rules: rules) }
        case let .userPasswd(name, password, cost):
            guard users.user(named: name) != nil else {
                send(.failure(KVOError(.notFound, UserDirectory.noSuchUser(name))), id: id, to: connection, counting: .admin)
                return
            }
            hashThenCommit(password: password, cost: cost, id: id, connection: connection) { .setPassword(user: name, passwordHash: $0) }
        case let .userRemove(name):
            commit(.remove(user: name), id: id, connection: connection)
        case let .userGrant(name, rules):
            commit(.grant(user: name, rules: rules), id: id, connection: connection)
        case let .userRevoke(name, rules):
            commit(.revoke(user: name, rules: rules), id: id, connection: connection)
        case let .tokenCreate(name):
            var made = APIToken.generate()
            while users.hasToken(id: made.token.id) { made = APIToken.generate() }
            commit(.addToken(user: name, token: made.token), tokenText: made.text, id: id, connection: connection)
        case let .tokenRevoke(name, tokenID):
            commit(.revokeToken(user: name, tokenID: tokenID), id: id, connection: connection)
        }
    }

    private func hashThenCommit(password: String, cost: PasswordHasher.Cost, id: JSONValue?, connection: Connection,
                                change: @escaping (String) -> UserChange) {
        connection.pauseReading(.verification)
        let job = PasswordHashJob(requestID: id, connection: connection.id, password: password, cost: cost) {
            [unowned self] job in
            guard let connection = self.connection(job.connection)?.takeUnretainedValue(), !connection.isClosing else { return }
            switch job.result {
            case let .success(hash): self.commit(change(hash), id: job.requestID, connection: connection)
            case let .failure(error): self.send(.failure(KVOError(.badRequest, "\(error)")), id: job.requestID, to: connection, counting: .admin)
            }
            connection.resumeReading(.verification)
        }
        job.start(on: loop.raw)
    }

    /// Carries out a user change for `connection`: at once in single mode; in cluster mode through the
    /// stream like a write (every node applies it in stream order, and this node answers once it has).
    /// `tokenText`: a new token's text, for the reply only (never replicated or stored).
    private func commit(_ change: UserChange, tokenText: String? = nil, id: JSONValue?, connection: Connection) {
        guard let cluster else {
            send(apply(change, tokenText: tokenText), id: id, to: connection, counting: .admin)
            return
        }
        let deadline = uv_now(loop.raw) &+ UInt64(cluster.configuration.writeTimeout * 1000)
        cluster.submit(userChange: change, user: connection.principal?.user,
                       writer: ClusterReplicator.Writer(connection: connection.id, requestID: id, operation: .admin,
                                                        deadline: deadline, tokenText: tokenText))
        // Counted with the connection's writes in flight: what it sends next is answered after this change.
        if pipelinedWrites.submitted(connection.id) >= configuration.maximumPendingRequests {
            connection.pauseReading(.replication)
        }
    }

    /// Applies a user change to the users, persists it, and updates the affected connections and
    /// bindings; the reply. The same on every node for the same users (cluster mode); only the reply's
    /// counts of this node's connections differ.
    private func apply(_ change: UserChange, tokenText: String?) -> Result<[(String, JSONValue)], KVOError> {
        do throws(UserDirectoryError) {
            try change.apply(to: users)
        } catch {
            switch error.kind {
            case .notFound: return .failure(KVOError(.notFound, error.message))
            case .exists: return .failure(KVOError(.exists, error.message))
            case .invalid: return .failure(KVOError(.badRequest, error.message))
            }
        }
        let name = change.user
        switch change {
        case .add:
            persistUsers(changed: [name])
            logger.notice("user '\(name)' added")
            if users.count == 1 { endOpenMode() }
            return .success([("user", .string(name))])
        case .remove:
            persistUsers(removed: [name])
            let closed = connections(of: name)
            for connection in closed { connection.close(reason: .userRemoved(name)) }
            // The user's bindings stop (no rights any more).
            compiledPolicies[name] = nil
            handler.engine.recheckBindings(ofUser: name)
            deliverBindingEvents()
            logger.notice("user '\(name)' removed; \(closed.count) connection\(closed.count == 1 ? "" : "s") closed")
            return .success([("user", .string(name)), ("closedConnections", .int(Int64(closed.count)))])
        case .setPassword:
            persistUsers(changed: [name])
            logger.notice("password of user '\(name)' changed")
            return .success([("user", .string(name))])
        case .grant, .revoke:
            return rulesChanged(of: name)
        case let .addToken(_, token):
            persistUsers(changed: [name])
            logger.notice("API token '\(token.id)' created for user '\(name)'")
            var reply: [(String, JSONValue)] = [("user", .string(name))]
            if let tokenText { reply.append(("token", .string(tokenText))) }
            reply.append(("tokenID", .string(token.id)))
            return .success(reply)
        case let .revokeToken(_, tokenID):
            persistUsers(changed: [name])
            logger.notice("API token '\(PrintableText.escaped(tokenID, limit: 64))' of user '\(name)' revoked")
            return .success([("user", .string(name)), ("revoked", .string(tokenID))])
        }
    }

    /// A user's rules changed: persisted, and every open connection of the user gets a new
    /// `Principal` at once (then `principalDidChange(of:)`).
    private func rulesChanged(of name: String) -> Result<[(String, JSONValue)], KVOError> {
        guard let user = users.user(named: name) else { return .failure(KVOError(.notFound, UserDirectory.noSuchUser(name))) }
        persistUsers(changed: [name])
        compiledPolicies[name] = nil
        let policy = self.policy(ofUser: name) ?? AccessPolicy(rules: user.rules)
        let open = connections(of: name)
        for connection in open {
            connection.principal = Principal(user: name, policy: policy)
            principalDidChange(of: connection)
        }
        // The user's bindings are re-checked even when none of its connections is open.
        handler.engine.recheckBindings(ofUser: name)
        deliverBindingEvents()
        logger.notice("rules of user '\(name)' changed; \(open.count) open connection\(open.count == 1 ? "" : "s") updated")
        return .success([("user", .string(name)), ("rules", .array(user.rules.map(\.json))),
                         ("updatedConnections", .int(Int64(open.count)))])
    }

    /// The open connections logged in as `name`. O(connections): admin operations only.
    private func connections(of name: String) -> [Connection] {
        slots.compactMap { $0?.takeUnretainedValue() }.filter { !$0.isClosing && $0.principal?.user == name }
    }

    /// Writes the users that changed (or were removed) where they live: the store's `users` table, or
    /// the users file. A failure stops kvod without acknowledging the change, like a failed commit.
    ///
    /// Cluster mode: a node with a store writes them with the next group commit, in the transaction
    /// that records the stream sequence applied, so a restarted node never applies a user change twice
    /// or misses one; a node without a store keeps them in memory only (its users file is the users it
    /// starts from: on a restart it applies the stream again from the start).
    private func persistUsers(changed: [String] = [], removed: [String] = []) {
        if cluster != nil {
            if store != nil { uncommittedUsers.formUnion(changed + removed) }
            return
        }
        do {
            if let store {
                try store.writeUsers(upserting: changed.compactMap { users.user(named: $0) }, deleting: removed)
            } else if let path = configuration.usersFile {
                try UsersFile.save(users, to: path)
            }
        } catch {
            logger.critical("cannot persist a user change: \(PrintableText.escaped("\(error)", limit: 1000)); stopping without acknowledging it")
            exit(74)  // EX_IOERR
        }
    }

    /// "127.0.0.1" of "127.0.0.1:50312", "::1" of "[::1]:50312".
    private static func host(ofPeer peer: String) -> String {
        guard let colon = peer.lastIndex(of: ":") else { return peer }
        var host = peer[..<colon]
        if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        return String(host)
    }

    /// Tells bindings' creators, if still connected, what the request did to their bindings (removed
    /// with a deleted object, a write refused), and logs it. Rare: most requests produce none.
    private func deliverBindingEvents() {
        let events = handler.engine.takeBindingEvents()
        for event in events {
            logger.notice("\(event.logDescription)")
            guard let creator = event.creator, let connection = connection(creator) else { continue }
            connection.takeUnretainedValue().enqueue(event.line)
        }
        if !events.isEmpty, loop.outputChunks.bytesInUse > configuration.maximumTotalOutputBytes { enforceTotalOutputLimit() }
        flushEarlyIfOutputIsLarge()
    }

    /// Queues a reply; `counting` names the request's operation for `kvod_requests_total` (nil: not a
    /// request's answer, or counted elsewhere).
    private func send(_ reply: Result<[(String, JSONValue)], KVOError>, id: JSONValue?, to connection: Connection,
                      counting operation: MetricsOperation? = nil) {
        if let operation {
            switch reply {
            case .success: metrics.countRequest(operation, error: nil)
            case let .failure(error): metrics.countRequest(operation, error: error.code)
            }
        }
        Server.empty(&replyBuffer)
        switch reply {
        case let .success(fields): ReplyEncoder.success(id: id, fields: fields, into: &replyBuffer)
        case let .failure(error): ReplyEncoder.failure(id: id, error: error, into: &replyBuffer)
        }
        connection.enqueueReply(replyBuffer)
        if loop.outputChunks.bytesInUse > configuration.maximumTotalOutputBytes { enforceTotalOutputLimit() }
    }

    /// The open connection with `id`, found by its slot (unretained: see `slots`).
    @inline(__always)
    private func connection(_ id: ConnectionID) -> Unmanaged<Connection>? {
        let slot = Int(id.slot)
        guard slot < slots.count, let connection = slots[slot],
              connection._withUnsafeGuaranteedRef({ $0.id.rawValue }) == id.rawValue
        else { return nil }
        return connection
    }

    /// Fans each notification out to its recipients, encoding it once per option variant. This is
    /// the per-event hot path. A first pass over the recipients finds which tail variants they need;
    /// each is appended once to `tailArena`. The second pass costs, per recipient, an array lookup of
    /// its connection by slot and the copies into its output chunks (the head as three word stores,
    /// the subscription id written in place, one `memcpy` of the shared tail), with no reference
    /// counting (connections and tails are reached through unretained pointers). When all recipients
    /// share one variant (the usual case) the second pass does not look at their options at all.
    /// Each recipient's head is the full or the compact one by its variant's `compactVariantBit` (the
    /// encoding its observation was made with), so the tails stay shared per encoding.
    /// `deliver(_:fullHead:compactHead:)` makes no further copy of the notification (`EventEncoder`'s
    /// static functions take it as a parameter): a copy retains and releases its strings, values and
    /// recipient list, and the encoder instance used before (holding a copy, and copied in turn) cost
    /// about 1,100 instructions per event.
    private func deliverNotifications() {
        let fullHead = EventEncoder.headWords
        let compactHead = EventEncoder.compactHeadWords
        for notification in notifications {
            deliver(notification, fullHead: fullHead, compactHead: compactHead)
        }
        if tailArena.capacity > Server.retainedScratchBytes { tailArena = [] }
    }

    /// One notification of `deliverNotifications()`.
    private func deliver(_ notification: borrowing ChangeNotification, fullHead: (UInt64, UInt64, UInt64),
                         compactHead: (UInt64, UInt64, UInt64)) {
        let chooser = EventEncoder.VariantChooser(notification)
        var values = EventEncoder.EncodedValues(notification)
        let recipients = notification.recipients
        var neededVariants = 0
        for recipient in recipients {
            neededVariants |= 1 << chooser.variant(for: recipient.options)
        }
        tailArena.removeAll(keepingCapacity: true)
        for variant in 0..<EventEncoder.variantCount where neededVariants & (1 << variant) != 0 {
            tailStarts[variant] = tailArena.count
            EventEncoder.appendTail(variant: variant, of: notification, values: &values, to: &tailArena)
            tailEnds[variant] = tailArena.count
        }
        let onlyVariant = neededVariants.nonzeroBitCount == 1 ? neededVariants.trailingZeroBitCount : nil
        var queuedBytes = 0
        tailArena.withUnsafeBytes { arena in
            let sharedTail = onlyVariant.map { UnsafeRawBufferPointer(rebasing: arena[tailStarts[$0]..<tailEnds[$0]]) }
            let sharedIsCompact = (onlyVariant ?? 0) & EventEncoder.compactVariantBit != 0
            for recipient in recipients {
                guard let connection = connection(recipient.connection) else { continue }
                let tail: UnsafeRawBufferPointer
                let isCompact: Bool
                if let sharedTail {
                    tail = sharedTail
                    isCompact = sharedIsCompact
                } else {
                    let variant = chooser.variant(for: recipient.options)
                    tail = UnsafeRawBufferPointer(rebasing: arena[tailStarts[variant]..<tailEnds[variant]])
                    isCompact = variant & EventEncoder.compactVariantBit != 0
                }
                queuedBytes &+= tail.count
                connection._withUnsafeGuaranteedRef {
                    if isCompact {
                        $0.enqueueEvent(head: compactHead, headLength: EventEncoder.compactHeadLength,
                                        subscription: recipient.subscription, tail: tail)
                    } else {
                        $0.enqueueEvent(head: fullHead, headLength: EventEncoder.fullHeadLength,
                                        subscription: recipient.subscription, tail: tail)
                    }
                }
            }
        }
        eventBytesSinceFlush += queuedBytes
        metrics.eventsSent &+= UInt64(recipients.count)
        metrics.eventBytesSent &+= UInt64(queuedBytes)
        // Once per notification, not per recipient: the pool counts bytes as chunks are taken.
        if loop.outputChunks.bytesInUse > configuration.maximumTotalOutputBytes { enforceTotalOutputLimit() }
    }

    // MARK: - Cluster data directories

    /// Why a data directory must not be used as it is asked to (nil: it may): a cluster node's directory holds
    /// the state of one stream and is never started alone or in another stream's cluster (it would diverge from
    /// the other nodes without anyone noticing), and a cluster node starts on data of its own stream or on an
    /// empty directory (revision 0, no classes), never on a single node's data.
    static func clusterDirectoryProblem(recorded: String?, cluster: ClusterConfiguration?, revision: UInt64,
                                        classes: Int) -> String? {
        switch (recorded, cluster) {
        case (nil, nil):
            return nil
        case let (recorded?, nil):
            return "the data directory belongs to cluster stream '\(recorded)': start it with --cluster and --cluster-stream \(recorded), or use another directory"
        case let (recorded?, cluster?) where recorded != cluster.stream:
            return "the data directory belongs to cluster stream '\(recorded)', not '\(cluster.stream)': use an empty directory for a node of another stream"
        case (_?, _?):
            return nil
        case (nil, _?) where revision > 0 || classes > 0:
            return "the data directory holds data written outside cluster mode (revision \(revision)): a cluster node starts on an empty directory and gets its state from the stream"
        case (nil, _?):
            return nil
        }
    }

    // MARK: - HTTP

    /// The metrics transport label of `connection` as it is now.
    private static func metricsTransport(of connection: Connection) -> ServerMetrics.Transport {
        if connection.webSocket != nil { return .webSocket }
        if connection.isHTTP { return .http }
        return connection.isTLS ? .tls : .tcp
    }

    /// Routes one HTTP request: `/ws` upgrades to WebSocket (the JSON-lines protocol, one message per text
    /// frame), `/healthz`, `/readyz` and `/metrics` answer at once, `/` and its files and `/kvod.js` come from
    /// `WebAssets` (the inspector page and the JavaScript client); anything else is 404 (405 for a method
    /// other than GET). A keep-alive connection then has `--first-request-timeout` for its next request.
    /// Before any of that, the request's `Host` must pass `HTTPHostCheck` (DNS rebinding), and `/metrics`
    /// may need a token (`HTTPMetricsAccess`). Loop thread.
    func connection(_ connection: Connection, didReceiveHTTPRequest request: HTTPRequestHead) {
        connection.hasSentRequest = true
        // The one Host check, before routing: every path, method and upgrade goes through it.
        guard let hostCheck = httpHostCheck else {  // never: made when the HTTP listener is bound
            self.connection(connection, didRefuseHTTPRequest: .serviceUnavailable, reason: "no HTTP listener")
            return
        }
        let host: HTTPAuthority?
        switch hostCheck.check(host: request.headers["host"], minorVersion: request.minorVersion) {
        case let .success(checked): host = checked
        case let .failure(refusal):
            self.connection(connection, didRefuseHTTPRequest: refusal.status, reason: refusal.reason)
            return
        }
        let keepAlive = request.keepAlive
        if request.path == "/ws" {
            upgrade(connection, request, host: host, hostCheck: hostCheck)
            return
        }
        guard request.method == "GET" else {
            answer(connection, HTTPResponse.text(.methodNotAllowed, "only GET is served here", keepAlive: keepAlive,
                                                 extraHeaders: [("Allow", "GET")]), keepAlive: keepAlive)
            return
        }
        switch request.path {
        case "/healthz":
            answer(connection, HTTPResponse.text(.ok, "ok", keepAlive: keepAlive), keepAlive: keepAlive)
        case "/readyz":
            let ready = !isStopping
            answer(connection, HTTPResponse.text(ready ? .ok : .serviceUnavailable, ready ? "ready" : "stopping",
                                                 keepAlive: keepAlive), keepAlive: keepAlive)
        case "/metrics":
            if let refusal = metricsRefusal(connection, request) {
                answer(connection, HTTPResponse.text(refusal.status, refusal.reason, keepAlive: keepAlive, extraHeaders: refusal.headers),
                       keepAlive: keepAlive)
                return
            }
            answer(connection, HTTPResponse.make(.ok, contentType: "text/plain; version=0.0.4; charset=utf-8",
                                                 body: renderMetrics(), keepAlive: keepAlive), keepAlive: keepAlive)
        default:
            if let asset = WebAsset.named(request.path) {
                answer(connection, HTTPResponse.make(.ok, contentType: asset.contentType, body: asset.body, keepAlive: keepAlive,
                                                     extraHeaders: [("Content-Security-Policy", WebAsset.contentSecurityPolicy),
                                                                    ("Referrer-Policy", "no-referrer")]),
                       keepAlive: keepAlive)
            } else {
                answer(connection, HTTPResponse.text(.notFound, "not found", keepAlive: keepAlive), keepAlive: keepAlive)
            }
        }
    }

    func connection(_ connection: Connection, didRefuseHTTPRequest status: HTTPStatus, reason: String) {
        connection.sendHTTPResponse(HTTPResponse.text(status, reason, keepAlive: false), keepAlive: false,
                                    reason: .httpRefused(status: status.rawValue, reason: reason))
    }

    /// Sends an HTTP response; on a keep-alive connection the next request must come within the first-request timeout.
    private func answer(_ connection: Connection, _ response: [UInt8], keepAlive: Bool) {
        connection.sendHTTPResponse(response, keepAlive: keepAlive)
        guard keepAlive, !connection.isClosing, configuration.firstRequestTimeout > 0 else { return }
        connection.hasSentRequest = false
        firstRequestDeadlines.add(connection.id, deadline: uv_now(loop.raw) &+ UInt64(configuration.firstRequestTimeout * 1000))
    }

    /// `GET /metrics` on a non-loopback listener with users defined: why it is refused without a server
    /// admin's bearer token (`HTTPMetricsAccess`); nil to serve it. A wrong token counts against the peer
    /// like a failed `auth`.
    private func metricsRefusal(_ connection: Connection, _ request: HTTPRequestHead)
        -> (status: HTTPStatus, reason: String, headers: [(String, String)])? {
        let decision = HTTPMetricsAccess.decide(
            authorization: request.headers["authorization"], usersDefined: !users.isEmpty,
            listenerIsLoopback: httpListener?.isLoopback ?? true
        ) { token in
            users.user(presentingToken: token).flatMap { user in policy(ofUser: user.name).map { (user.name, $0) } }
        }
        if decision == .invalidToken {
            passwordChecks.peerFailures.recordFailure(of: Server.host(ofPeer: connection.peer), now: uv_now(loop.raw))
        }
        return HTTPMetricsAccess.refusal(decision)
    }

    /// `GET /ws`: checks the Origin (`HTTPHostCheck.allows`) and the handshake, then switches the connection to WebSocket.
    private func upgrade(_ connection: Connection, _ request: HTTPRequestHead, host: HTTPAuthority?, hostCheck: HTTPHostCheck) {
        guard hostCheck.allows(origin: request.headers["origin"], host: host) else {
            let reason = "origin '\(PrintableText.escaped(request.headers["origin"] ?? "", limit: 200))' is not this listener's own and not allowed (--http-allowed-origin)"
            connection.sendHTTPResponse(HTTPResponse.text(.forbidden, reason, keepAlive: false), keepAlive: false,
                                        reason: .httpRefused(status: 403, reason: reason))
            return
        }
        switch WebSocketHandshake.accept(request) {
        case let .failure(refusal):
            let headers = refusal.status == .upgradeRequired ? [("Sec-WebSocket-Version", "13"), ("Upgrade", "websocket")] : []
            connection.sendHTTPResponse(HTTPResponse.text(refusal.status, refusal.reason, keepAlive: false, extraHeaders: headers),
                                        keepAlive: false, reason: .httpRefused(status: refusal.status.rawValue, reason: refusal.reason))
        case let .success(accept):
            let wasOpenAs = Server.metricsTransport(of: connection)
            guard connection.upgradeToWebSocket(accept: accept) else { return }
            metrics.connectionUpgraded(from: wasOpenAs, to: .webSocket)
            if connection.principal == nil { addLoginDeadline(for: connection) }
        }
    }

    // MARK: - Metrics

    /// `GET /metrics`: the Prometheus text exposition of `metrics` and the current gauges. Loop thread.
    func renderMetrics() -> [UInt8] {
        let engine = handler.engine
        return metrics.render(ServerMetrics.Gauges(
            objects: engine.objectCount, observations: engine.observationCount, revision: engine.revision,
            historyEntries: engine.historyCount, historyBytes: engine.historyBytes, storedBytes: engine.storedBytes,
            outputBufferedBytes: loop.outputChunks.bytesInUse, inputBufferedBytes: loop.bufferedInputBytes))
    }

    // MARK: - Global bounds

    /// Scratch buffers (reply, event tails) larger than this are freed after use rather than kept.
    private static let retainedScratchBytes = 1 << 20

    /// Empties a scratch buffer for reuse, keeping its memory unless a large reply or event grew it
    /// past `retainedScratchBytes` (then it would hold that memory for good). One access to `buffer`.
    @inline(__always)
    private static func empty(_ buffer: inout [UInt8]) {
        if buffer.capacity > retainedScratchBytes {
            buffer = []
        } else {
            buffer.removeAll(keepingCapacity: true)
        }
    }

    /// All connections' queued output passed `--max-total-output`: closes the connections with the
    /// most queued first (the slowest consumers: a connection that keeps up has little queued) until
    /// the rest fit, logging why. Closing gives a connection's pending chunks back at once; those of a
    /// write in flight come back when the write is cancelled (next loop phase), so they are counted
    /// as freed already. Rare: O(connections).
    private func enforceTotalOutputLimit() {
        let limit = configuration.maximumTotalOutputBytes
        var candidates: [(bytes: Int, connection: Connection)] = []
        for case let entry? in slots {
            let connection = entry.takeUnretainedValue()
            if connection.outputBytes > 0 { candidates.append((connection.outputBytes, connection)) }
        }
        candidates.sort { $0.bytes > $1.bytes }
        var beingFreed = 0
        for candidate in candidates {
            let total = loop.outputChunks.bytesInUse - beingFreed
            guard total > limit else { break }
            beingFreed += candidate.connection.inFlightBytes
            candidate.connection.close(reason: .totalOutputLimitExceeded(queued: candidate.bytes, total: total, limit: limit))
        }
    }

    /// All connections' unfinished lines passed `--max-total-input`: closes the connections holding
    /// the largest until the rest fit, logging why. Rare: O(connections).
    private func enforceTotalInputLimit() {
        let limit = configuration.maximumTotalInputBytes
        while loop.bufferedInputBytes > limit {
            var largest: Connection?
            for case let entry? in slots {
                let connection = entry.takeUnretainedValue()
                if connection.accountedInputBytes > (largest?.accountedInputBytes ?? 0) { largest = connection }
            }
            guard let largest else { return }
            largest.close(reason: .totalInputLimitExceeded(buffered: largest.accountedInputBytes,
                                                           total: loop.bufferedInputBytes, limit: limit))
        }
    }

    /// Logs the failed logins that were counted and not logged one by one.
    private func logSuppressedAuthenticationFailures(_ count: Int) {
        logger.warning("\(count) more authentication failure\(count == 1 ? "" : "s") within a second of the last one logged; not logged one by one")
    }

    /// Logs the closings of one kind that were counted and not logged one by one.
    private func logSuppressedClosings(_ count: Int, slot: Int) {
        let connections = count == 1 ? "connection" : "connections"
        logger.warning("\(count) more \(connections) closed (\(CloseReason.rateLimitSummary(slot: slot))) within a second of the last one logged; not logged one by one")
    }

    /// The housekeeping tick: closes connections that sent no request before their deadline, and
    /// returns memory to the system once the buffers have drained after a burst.
    private func housekeep() {
        let now = uv_now(loop.raw)
        if let cluster {
            expireClusterWrites(cluster, now: now)
            expireRevisionWaits(cluster, now: now)
        }
        if !firstRequestDeadlines.isEmpty {
            for due in firstRequestDeadlines.takeDue(now: now) {
                guard let connection = connection(due.connection)?.takeUnretainedValue(), !connection.hasSentRequest,
                      !connection.isClosing
                else { continue }
                connection.close(reason: .noRequestBeforeTimeout(seconds: configuration.firstRequestTimeout))
            }
        }
        if !loginDeadlines.isEmpty {
            for due in loginDeadlines.takeDue(now: now) {
                guard let connection = connection(due.connection)?.takeUnretainedValue(), connection.principal == nil,
                      !connection.isClosing, !connection.pausedReasons.contains(.verification)
                else { continue }
                connection.close(reason: .notLoggedInBeforeTimeout(seconds: configuration.loginTimeout))
            }
        }
        if !tlsHandshakeDeadlines.isEmpty {
            for due in tlsHandshakeDeadlines.takeDue(now: now) {
                guard let connection = connection(due.connection)?.takeUnretainedValue(), connection.isAwaitingTLSHandshake,
                      !connection.isClosing
                else { continue }
                connection.close(reason: .tlsHandshakeTimeout(seconds: configuration.tls?.handshakeTimeout ?? 0))
            }
        }
        for slot in closingLogLimits.indices {
            if let count = closingLogLimits[slot].takeUnreported(at: now) { logSuppressedClosings(count, slot: slot) }
        }
        if let count = authenticationFailureLog.takeUnreported(at: now) { logSuppressedAuthenticationFailures(count) }
        let pool = loop.outputChunks
        peakBufferedInputBytes = max(peakBufferedInputBytes, loop.bufferedInputBytes)
        let current = pool.bytesInUse + loop.bufferedInputBytes
        if heapTrimmer.trimIfWorthwhile(peak: pool.peakBytesInUse + peakBufferedInputBytes, current: current, now: now) {
            pool.resetPeak()
            peakBufferedInputBytes = loop.bufferedInputBytes
            logger.debug("returned free memory to the system after a burst")
        }
    }

    // MARK: - Flushing

    /// Group commit: makes every write accepted during this loop iteration durable, in one
    /// transaction, before any reply or event about it leaves the server. If the disk refuses, kvod
    /// stops at once without sending them: nothing is acknowledged that is not stored.
    private func commitPendingWrites() {
        guard let store else { return }
        var batch = handler.engine.takeCommitBatch()
        if let cluster, cluster.appliedSequence != cluster.committedSequence { batch.streamSequence = cluster.appliedSequence }
        if !uncommittedUsers.isEmpty {
            for name in uncommittedUsers.sorted() { batch.users[name] = .some(users.user(named: name)) }
            uncommittedUsers.removeAll()
        }
        guard !batch.isEmpty || batch.streamSequence != nil else { return }
        do {
            let started = uv_hrtime()
            try store.commit(batch)
            if let sequence = batch.streamSequence { cluster?.committedSequence = sequence }
            metrics.groupCommitted(nanoseconds: uv_hrtime() &- started)
            checkpointIfNeeded(store)
        } catch {
            let revisions = batch.entries.first.map { "revisions \($0.rev)...\(batch.revision)" } ?? "class or binding definitions"
            logger.critical("cannot persist \(revisions): \(PrintableText.escaped("\(error)", limit: 1000)); stopping without acknowledging them")
            exit(74)  // EX_IOERR
        }
    }

    /// After a group commit: a passive checkpoint on the thread pool once the WAL holds
    /// `walCheckpointStartBytes` (one at a time; when one ends and the WAL still needs one, the next
    /// commit queues it). When the commit took the WAL past `--wal-limit` (checkpoints not keeping up),
    /// the store ran the blocking fallback itself (`PersistentStore.blockingCheckpoint`): logged here, at
    /// most once a second.
    private func checkpointIfNeeded(_ store: PersistentStore) {
        if let fallback = store.blockingCheckpoint, let count = blockingCheckpointLog.record(at: uv_now(loop.raw)) {
            let what = count == 1 ? "a blocking checkpoint" : "\(count) blocking checkpoints"
            if fallback.emptied {
                logger.warning("the WAL passed --wal-limit (\(fallback.walBytes) bytes, limit \(store.walLimitBytes)): \(what) on the event loop; background checkpoints are not keeping up with the writes")
            } else {
                logger.error("the WAL passed --wal-limit (\(fallback.walBytes) bytes, limit \(store.walLimitBytes)) and \(what) could not empty it within 10 s (another process reading the database?); trying again after the next commit")
            }
        }
        if store.checkpointNeed != .none {
            checkpointJob?.start(on: loop.raw) { _ in }
        }
    }

    /// Closes the background checkpoint's connection, then the store (the last connection to close
    /// checkpoints the WAL into the database file and removes it).
    private func closeStore() {
        checkpointJob?.close()
        store?.close()
    }

    /// End of a loop iteration: commit this iteration's writes, then one write per connection with
    /// output.
    private func flushConnections() {
        if let cluster { publishClusterBatch(cluster) }
        commitPendingWrites()
        eventBytesSinceFlush = 0
        guard !flushQueue.isEmpty else { return }
        swap(&flushQueue, &flushing)
        for connection in flushing { connection.flush() }
        flushing.removeAll(keepingCapacity: true)
    }

    /// Fast path for a large burst (many pipelined writes fanned out to many subscribers in one loop
    /// iteration): once the events queued since the last flush pass `earlyFlushBytes`, write them
    /// now instead of at the end of the iteration, so the kernel copies output that is still in the
    /// CPU cache and the chunks go back to the pool to be reused while warm. Written at the end, a
    /// burst's output (tens of MB at 100 subscribers) is cold by the time it is copied. Only when
    /// `mayWriteImmediately`: output about writes not yet durable still waits for the group commit.
    /// Per connection the order is unchanged (a flush writes what is queued, in order).
    @inline(__always)
    private func flushEarlyIfOutputIsLarge() {
        guard eventBytesSinceFlush >= Server.earlyFlushBytes, mayWriteImmediately else { return }
        flushConnections()
    }

    /// Event bytes (tails, all recipients together) that trigger `flushEarlyIfOutputIsLarge()`.
    /// 4 MiB measured best at 100 subscribers (40 KiB per connection per write): 1 MiB and less
    /// paid more in `write` calls than they saved in cache misses, 8 MiB and more (or never
    /// flushing early) left the output cold (docs/performance.md, optimisation steps).
    private static let earlyFlushBytes = 4 << 20

    /// Hands out the lines held by connections resumed since the last check phase (each may pause
    /// again, holding the rest for a later round). Runs before the group commit, so their replies go
    /// out in this iteration's flush.
    private func replayHeldInput() {
        guard !heldInputQueue.isEmpty else { return }
        let connections = heldInputQueue
        heldInputQueue.removeAll(keepingCapacity: true)
        for connection in connections { connection.replayHeldInput() }
        if heldInputQueue.isEmpty { uv_idle_stop(replayIdleHandle) }
    }

    // MARK: - Cluster

    /// Start-up (before the loop serves): `SnapshotBootstrap.run`, logging what it did and the snapshot it
    /// chose.
    private static func bootstrap(_ cluster: ClusterConfiguration, applied: UInt64, logger: Logger) -> SnapshotBootstrap.Outcome {
        let outcome = SnapshotBootstrap.run(cluster, applied: applied) { text, isError in
            if isError { logger.warning("\(text)") } else { logger.info("\(text)") }
        }
        if case let .install(snapshot) = outcome {
            logger.info("cluster: bootstrapping from the snapshot of stream sequence \(snapshot.sequence) (revision \(snapshot.revision), \(snapshot.objects.count) objects, \(snapshot.classes.count) classes, \(snapshot.bindings.count) bindings); the stream is consumed from \(snapshot.sequence + 1)")
        }
        return outcome
    }

    /// Cluster mode: a write is not applied here and now but queued for the stream (the next check phase
    /// appends this iteration's writes as one batch). The connection goes on reading: more writes join the
    /// queue (answered in request order, as one node's batches apply in stream order), anything else is held
    /// until they are answered (`pipelinedWrites`), and at `--max-pending-requests` writes in flight it
    /// reads nothing more until one is answered. `bind`, `combineLatest` and
    /// `unbind` go the same way: every node creates the binding with the same id, and its `binding`
    /// events reach the creator's connection on this node only (`applyClusterEntry`). Loop thread.
    private func submitToCluster(_ cluster: ClusterReplicator, _ request: Request, line: UnsafeBufferPointer<UInt8>,
                                 id: JSONValue?, connection: Connection) {
        let operation = MetricsOperation(request)
        let deadline = uv_now(loop.raw) &+ UInt64(cluster.configuration.writeTimeout * 1000)
        cluster.submit(line: Array(line), user: connection.principal?.user,
                       writer: ClusterReplicator.Writer(connection: connection.id, requestID: id, operation: operation,
                                                        deadline: deadline))
        if pipelinedWrites.submitted(connection.id) >= configuration.maximumPendingRequests {
            connection.pauseReading(.replication)
        }
    }

    /// Answers a cluster write (applied, refused or `unavailable`) if its connection is still open. Returns
    /// the connection when this was its last write in flight and a request is held behind it: the caller
    /// hands it to `releaseHeldRequest` once it may handle a request (not in the middle of an entry).
    private func answerClusterWrite(_ writer: ClusterReplicator.Writer,
                                    _ reply: Result<[(String, JSONValue)], KVOError>) -> Connection? {
        let remaining = pipelinedWrites.answered(writer.connection)
        guard let connection = connection(writer.connection)?.takeUnretainedValue() else {
            if remaining == 0 { _ = pipelinedWrites.takeHeld(writer.connection) }
            return nil
        }
        send(reply, id: writer.requestID, to: connection, counting: writer.operation)
        if pipelinedWrites.isHolding(writer.connection) { return remaining == 0 ? connection : nil }
        if remaining < configuration.maximumPendingRequests { connection.resumeReading(.replication) }
        return nil
    }

    /// Handles the request `connection` held behind its writes, now all answered, and lets it read again.
    private func releaseHeldRequest(_ connection: Connection) {
        guard let held = pipelinedWrites.takeHeld(connection.id) else { return }
        if !connection.isClosing {
            switch held {
            case let .line(line): line.withUnsafeBufferPointer { handleLine($0, from: connection) }
            case .oversizedLine: answerOversizedLine(connection)
            }
        }
        connection.resumeReading(.replication)
    }

    /// Check phase: hands the writes queued this iteration to the bridge as one batch (unless a batch is
    /// still being appended: they then go with the next one).
    private func publishClusterBatch(_ cluster: ClusterReplicator) {
        let deadline = uv_hrtime() &+ UInt64(cluster.configuration.writeTimeout * 1e9)
        if let job = cluster.takeBatch(deadline: deadline) { clusterBridge?.enqueue(job) }
    }

    /// The bridge posted: apply stream entries in order, note appended batches, answer writes whose batch
    /// could not be appended. Loop thread (the cluster async handle).
    private func drainClusterInbox() {
        guard let cluster, let clusterInbox else { return }
        for message in clusterInbox.takeAll() {
            switch message {
            case let .entry(sequence, data):
                applyClusterEntry(cluster, sequence: sequence, data: data)
                releaseRevisionWaits()
            case let .published(batch, _):
                cluster.appended(batch)
            case let .publishFailed(batch, reason, attempted):
                logger.error("cluster: could not append a batch in \(cluster.configuration.writeTimeout) s: \(reason)")
                answerUnavailable(cluster.appendFailed(batch, attempted: attempted))
            case let .log(text, isError):
                if isError { logger.warning("\(text)") } else { logger.info("\(text)") }
            }
        }
    }

    /// Applies stream entry `sequence` through the engine, as every node does: each operation with its
    /// writer's rights, its events delivered to this node's observers, and its reply sent when the writer
    /// is connected here. Entries at or below the applied sequence (a consumer restarted) are skipped; a
    /// gap, an entry that does not decode or one of an unknown engine version stops the node (exit 65)
    /// rather than let it diverge: what it applied before is committed, and it resumes from there.
    private func applyClusterEntry(_ cluster: ClusterReplicator, sequence: UInt64, data: [UInt8]) {
        guard sequence > cluster.appliedSequence else { return }
        guard sequence == cluster.appliedSequence + 1 else {
            stopForCluster("stream entry \(sequence) arrived after \(cluster.appliedSequence): entries \(cluster.appliedSequence + 1)...\(sequence - 1) are missing (trimmed from the stream: restarted, this node installs the newest snapshot)")
        }
        let entry: ReplicationEntry
        do throws(ReplicationEntryError) {
            entry = try ReplicationEntry.decode(data)
        } catch {
            stopForCluster("stream entry \(sequence): \(error)")
        }
        guard KVOEngine.oldestReplicationVersion...KVOEngine.replicationVersion ~= entry.version else {
            stopForCluster("stream entry \(sequence) is of engine version \(entry.version); this kvod knows versions \(KVOEngine.oldestReplicationVersion)...\(KVOEngine.replicationVersion) only: upgrade it")
        }
        let writers = entry.node == cluster.configuration.node ? cluster.writers(ofApplied: entry.batch) : nil
        var released: [Connection] = []
        for (index, operation) in entry.operations.enumerated() {
            let writer = writers.flatMap { index < $0.count ? $0[index] : nil }
            if let change = operation.userChange {
                let reply = applyReplicated(change, by: operation.user, tokenText: writer?.tokenText)
                guard let writer else { continue }
                if let connection = answerClusterWrite(writer, reply) { released.append(connection) }
                continue
            }
            let decoded = RequestDecoder.decode(operation.line)
            let outcome: RequestHandler.Outcome
            notifications.removeAll(keepingCapacity: true)
            switch decoded.request {
            case let .success(request) where request.isWrite:
                outcome = handler.handle(request, valueText: decoded.valueText,
                                         from: writer?.connection ?? Server.clusterConnection,
                                         access: clusterAccess(forUser: operation.user), notifications: &notifications)
            case .success:
                outcome = .init(reply: .failure(KVOError(.badRequest, "not a write")), order: .afterNotifications)
            case let .failure(error):
                outcome = .init(reply: .failure(error), order: .afterNotifications)
            }
            deliverNotifications()
            deliverBindingEvents()
            guard let writer else { continue }
            if let connection = answerClusterWrite(writer, outcome.reply) { released.append(connection) }
        }
        cluster.appliedSequence = sequence
        if let snapshotPublisher, sequence % cluster.configuration.snapshotEvery == 0 {
            snapshotPublisher.enqueue(ClusterSnapshot(engine: handler.engine, users: users, sequence: sequence))
        }
        for connection in released { releaseHeldRequest(connection) }
    }

    /// A read or observe whose `atLeastRev` is beyond this node's revision. In cluster mode it waits until
    /// this node applies that revision (the connection reads nothing more meanwhile, so replies stay in
    /// request order) or `--cluster-write-timeout` passes (`unavailable`). In single mode no other node
    /// will bring that revision, and every revision this server gave is at or below its own: the request
    /// is refused at once (`bad_request`). Loop thread.
    private func holdForRevision(_ revision: UInt64, _ request: Request, decoded: RequestDecoder.Decoded,
                                 connection: Connection) {
        guard let cluster else {
            let message = "'atLeastRev' \(revision) is beyond this server's revision \(handler.engine.revision) (a revision from another server, or from before an in-memory server restarted?)"
            send(.failure(KVOError(.badRequest, message)), id: decoded.id, to: connection, counting: MetricsOperation(request))
            return
        }
        let deadline = uv_now(loop.raw) &+ UInt64(cluster.configuration.writeTimeout * 1000)
        revisionWaits.add(RevisionWaits.Waiting(revision: revision, connection: connection.id, requestID: decoded.id,
                                                request: request, valueText: decoded.valueText, deadline: deadline))
        connection.pauseReading(.revision)
    }

    /// After an entry was applied: carries out the held requests whose revision this node has reached,
    /// and lets their connections read again.
    private func releaseRevisionWaits() {
        guard !revisionWaits.isEmpty else { return }
        for item in revisionWaits.takeReady(revision: handler.engine.revision) {
            guard let connection = connection(item.connection)?.takeUnretainedValue(), !connection.isClosing else { continue }
            perform(item.request, id: item.requestID, valueText: item.valueText, connection: connection)
            connection.resumeReading(.revision)
        }
    }

    /// Held requests past `--cluster-write-timeout`: answered `unavailable`, their connections read again.
    private func expireRevisionWaits(_ cluster: ClusterReplicator, now: UInt64) {
        guard !revisionWaits.isEmpty else { return }
        for item in revisionWaits.takeExpired(now: now) {
            guard let connection = connection(item.connection)?.takeUnretainedValue(), !connection.isClosing else { continue }
            let message = "this node had not applied revision \(item.revision) within \(cluster.configuration.writeTimeout) s (it is at \(handler.engine.revision): behind, or cut off from the stream)"
            send(.failure(KVOError(.unavailable, message)), id: item.requestID, to: connection,
                 counting: MetricsOperation(item.request))
            connection.resumeReading(.revision)
        }
    }

    /// A user change from the stream: applied when its sender is, at this point of the stream, a user
    /// with admin on every object (checked again here, as every node does, since the sender's rights may
    /// have changed since the node that took it checked them).
    private func applyReplicated(_ change: UserChange, by sender: String?, tokenText: String?) -> Result<[(String, JSONValue)], KVOError> {
        guard let sender, policy(ofUser: sender)?.isServerAdmin == true else {
            return .failure(KVOError(.forbidden, "user management needs admin on every object (a rule '*=admin')"))
        }
        return apply(change, tokenText: tokenText)
    }

    /// Who an operation from the stream acts as: its writer's user with this node's rules for the user
    /// (the users must be the same on every node), or open mode's rights for a write made in open mode.
    private func clusterAccess(forUser user: String?) -> ConnectionAccess {
        guard let user else { return users.isEmpty ? ConnectionAccess.open() : ConnectionAccess(ConnectionAccess.nobody) }
        guard let policy = policy(ofUser: user) else { return ConnectionAccess(ConnectionAccess.nobody) }
        return ConnectionAccess(Principal(user: user, policy: policy))
    }

    /// Writes past `--cluster-write-timeout`: answered `unavailable`, their connections read again.
    private func expireClusterWrites(_ cluster: ClusterReplicator, now: UInt64) {
        let expired = cluster.expire(now: now)
        guard !expired.isEmpty else { return }
        logger.warning("cluster: \(expired.count) write\(expired.count == 1 ? "" : "s") not applied within \(cluster.configuration.writeTimeout) s; answered unavailable")
        answerUnavailable(expired)
    }

    private func answerUnavailable(_ expired: [ClusterReplicator.Expired]) {
        guard let cluster else { return }
        var released: [Connection] = []
        for item in expired {
            let seconds = cluster.configuration.writeTimeout
            let message = item.definitive
                ? "the cluster's stream could not be reached within \(seconds) s (NATS unavailable); the write was not made"
                : "the write was not confirmed within \(seconds) s (NATS unavailable or slow); it may still be applied: read before retrying"
            if let connection = answerClusterWrite(item.writer, .failure(KVOError(.unavailable, message))) {
                released.append(connection)
            }
        }
        for connection in released { releaseHeldRequest(connection) }
    }

    /// The connection id stream operations from other nodes run as (their writer is elsewhere).
    private static let clusterConnection = ConnectionID(0, slot: UInt32.max)

    /// Stops the node without applying further: what it applied is committed, so a restart resumes from there.
    private func stopForCluster(_ reason: String) -> Never {
        logger.critical("cluster: \(reason); stopping this node")
        commitPendingWrites()
        exit(65)  // EX_DATAERR
    }

    // MARK: - libuv callbacks

    private static let checkCallback: uv_check_cb = { handle in
        let server = owner(of: asHandle(handle!), as: Server.self)
        server.replayHeldInput()
        server.flushConnections()
        server.metrics.iterationEnded(loop: server.loop.raw)
    }

    /// Does nothing: an active idle handle only keeps the loop from blocking in poll.
    private static let idleCallback: uv_idle_cb = { _ in }

    /// Milliseconds between housekeeping ticks (Redis's `hz 10`).
    private static let housekeepingInterval: UInt64 = 100

    private static let housekeepingCallback: uv_timer_cb = { handle in
        owner(of: asHandle(handle!), as: Server.self).housekeep()
    }

    private static let asyncCallback: uv_async_cb = { handle in
        owner(of: asHandle(handle!), as: Server.self).stop()
    }

    private static let clusterCallback: uv_async_cb = { handle in
        owner(of: asHandle(handle!), as: Server.self).drainClusterInbox()
    }

    private static let signalCallback: uv_signal_cb = { handle, signal in
        let server = owner(of: asHandle(handle!), as: Server.self)
        if signal == SIGHUP {
            server.logger.info("received signal SIGHUP: reloading the TLS certificate and key")
            server.reloadTLS()
            return
        }
        server.logger.info("received signal \(signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : String(signal))")
        server.stop()
    }
}

extension Server: ConnectionDelegate {
    func connection(_ connection: Connection, didReceiveLine line: UnsafeBufferPointer<UInt8>) {
        handleLine(line, from: connection)
    }

    func connectionDidReceiveOversizedLine(_ connection: Connection) {
        // Cluster mode: answered in order, after the connection's writes in flight.
        if cluster != nil, pipelinedWrites.count(of: connection.id) > 0 {
            pipelinedWrites.hold(.oversizedLine, for: connection.id)
            connection.pauseReading(.replication)
            return
        }
        answerOversizedLine(connection)
    }

    private func answerOversizedLine(_ connection: Connection) {
        let error = KVOError(.tooLarge, "line longer than \(configuration.maximumLineLength) bytes; discarded")
        send(.failure(error), id: nil, to: connection)
    }

    var mayWriteImmediately: Bool {
        store == nil || (!handler.engine.hasUncommittedWrites && (cluster == nil || cluster!.appliedSequence == cluster!.committedSequence))
    }

    func connectionsPassedTotalInputLimit(_ connection: Connection) {
        peakBufferedInputBytes = max(peakBufferedInputBytes, loop.bufferedInputBytes)
        enforceTotalInputLimit()
    }

    func connectionDidCompleteTLSHandshake(_ connection: Connection) {
        var metadata: Logger.Metadata = ["connection": "\(connection.id)", "peer": "\(connection.peer)"]
        if let name = connection.verifiedClientCommonName { metadata["clientCN"] = "\(PrintableText.escaped(name))" }
        logger.debug("TLS handshake complete", metadata: metadata)
        // A verified client certificate whose CN names a user logs the connection in as that user, as a
        // successful `auth` would (docs/protocol.md, "TLS"); in open mode there is nobody to be.
        if connection.principal == nil, let name = connection.verifiedClientCommonName, let user = users.user(named: name) {
            connection.principal = Principal(user: user.name, policy: policy(ofUser: user.name) ?? AccessPolicy(rules: user.rules))
            logger.debug("authenticated by client certificate", metadata: [
                "connection": "\(connection.id)", "peer": "\(connection.peer)", "user": "\(user.name)",
            ])
        }
    }

    func connectionNeedsFlush(_ connection: Connection) {
        flushQueue.append(connection)
    }

    func connectionHasHeldInput(_ connection: Connection) {
        if heldInputQueue.isEmpty { uv_idle_start(replayIdleHandle, Server.idleCallback) }
        heldInputQueue.append(connection)
    }

    func connectionDidClose(_ connection: Connection, reason: CloseReason) {
        let slot = Int(connection.id.slot)
        if slot < slots.count, slots[slot]?.takeUnretainedValue() === connection {
            slots[slot] = nil
            freeSlots.append(UInt32(slot))
            openConnections -= 1
            metrics.connectionClosed(Server.metricsTransport(of: connection), reason: reason)
        }
        let removed = handler.engine.disconnect(connection.id)
        if connection.pausedReasons.contains(.verification) { passwordChecks.cancelWaiting(of: connection.id) }
        let metadata: Logger.Metadata = [
            "connection": "\(connection.id)", "peer": "\(connection.peer)", "subscriptions": "\(removed)",
        ]
        if reason.isNoteworthy {
            if let slot = reason.rateLimitSlot {
                // The count includes this closing: the others were held back since the last line.
                guard let count = closingLogLimits[slot].record(at: uv_now(loop.raw)) else { return }
                if count > 1 { logSuppressedClosings(count - 1, slot: slot) }
            }
            logger.warning("connection closed: \(reason)", metadata: metadata)
        } else {
            logger.debug("connection closed: \(reason)", metadata: metadata)
        }
    }
}
