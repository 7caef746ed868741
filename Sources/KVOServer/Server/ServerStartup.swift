import KVOJSON
import Logging
import KVOEngine
import KVOModel

/// Start-up before the loop exists: opens the store the configuration asks for (`openStore()`), restores
/// the engine and the users from it, checks a data directory against the cluster configuration, installs
/// a cluster snapshot when `SnapshotBootstrap` chooses one, and reads the users file of an in-memory kvod.
/// What `Server.init` then wires to the loop, the listeners and the cluster bridge.
///
/// Runs on the thread that makes the server (which becomes its loop thread); the values it returns are the
/// server's from then on. When it throws, what it opened (the store, the users file's lock) is released
/// with it.
struct ServerStartup {
    /// Open; the server closes it after its loop has run dry.
    let store: any Store
    /// Restored, with the configuration's limits set.
    let engine: KVOEngine
    let users: UserDirectory
    /// `--users FILE` (in memory): the file's lock, held shared for the whole run (`UsersFileLock`).
    let usersFileLock: UsersFileLock?
    /// Cluster mode: the stream sequence the restored state has applied (0: none).
    let appliedSequence: UInt64
    /// The stream sequence of the snapshot this node installed at start-up (`SnapshotBootstrap`), if any.
    let bootstrapSnapshot: UInt64?
    /// Cluster mode: what the node knew of the stream at `appliedSequence` (`StreamIntegrity`).
    let streamIntegrity: StreamIntegrity.State
    /// The sessions the last run left (`Server+Presence`), to be ended after their grace unless resumed; in cluster
    /// mode the replicated table at `appliedSequence` (an installed snapshot's).
    let sessions: [PresenceSession]
    /// Stored sessions a snapshot installed at start-up replaced: their rows go at the first group commit.
    let replacedSessionIDs: [String]

    /// What the store held, after the cluster's checks and a snapshot's install.
    private struct Restored {
        var state: PersistedState
        var users: UserDirectory
        var appliedSequence: UInt64 = 0
        var streamIntegrity = StreamIntegrity.State()
        var sessions: [PresenceSession] = []
        var replacedSessionIDs: [String] = []
        var bootstrapSnapshot: UInt64?
        /// The users of the installed snapshot (nil: none installed, or a snapshot older than replicated users).
        var snapshotUsers: [UserRecord]?
        /// Why this node must not start on what the store holds (a directory of another stream, a snapshot
        /// refused), reported once the restore is logged.
        var directoryProblem: String?
    }

    init(configuration: ServerConfiguration) throws(ServerStartError) {
        let logger = configuration.logger
        if let cluster = configuration.cluster, let problem = cluster.problem { throw .configuration(problem) }
        let store: any Store
        let restored: Restored
        do throws(StorageError) {
            store = try configuration.openStore()
            restored = try Self.restore(from: store, configuration)
        } catch {
            throw .storage(Self.namingDatabase(error, configuration.storage))
        }
        let engine: KVOEngine
        if store.keepsWrites || restored.bootstrapSnapshot != nil {
            engine = KVOEngine(restoring: restored.state, historyLimit: configuration.historyLimit,
                               historyByteLimit: configuration.historyByteLimit, recordsCommitBatches: store.keepsWrites)
        } else {
            engine = KVOEngine(historyLimit: configuration.historyLimit, historyByteLimit: configuration.historyByteLimit)
        }
        if store.keepsWrites { Self.logRestore(restored.state, engine: engine, store: store, logger: logger) }
        if let problem = restored.directoryProblem { throw .configuration(problem) }
        if restored.bootstrapSnapshot != nil, let problem = engine.restoreProblems.first {
            throw .configuration("the cluster snapshot could not be installed whole (\(problem)): this node would diverge")
        }
        var users = restored.users
        var usersFileLock: UsersFileLock?
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
        if let snapshotUsers = restored.snapshotUsers { users = UserDirectory(snapshotUsers) }
        engine.sizeLimits = configuration.sizeLimits
        engine.maximumObservationsPerConnection = configuration.maximumObservationsPerConnection
        if engine.storedBytes > configuration.sizeLimits.maximumStoredBytes {
            logger.warning("""
                the store holds \(engine.storedBytes) bytes, more than --max-memory \(configuration.sizeLimits.maximumStoredBytes): \
                writes that would grow it are refused (quota_exceeded) until enough is deleted
                """)
        }
        self.store = store
        self.engine = engine
        self.users = users
        self.usersFileLock = usersFileLock
        self.appliedSequence = restored.appliedSequence
        self.bootstrapSnapshot = restored.bootstrapSnapshot
        self.streamIntegrity = restored.streamIntegrity
        self.sessions = restored.sessions
        self.replacedSessionIDs = restored.replacedSessionIDs
    }

    /// Every start-up refusal of a data directory names the file: a damaged row (`.corrupt`, which names the
    /// row) as a refusal of the database that holds it, and a SQLite error from anywhere in the opening (the
    /// background checkpoint's connection included) as `SQLiteStore.describingOpenFailure` words it.
    private static func namingDatabase(_ error: StorageError, _ storage: StorageConfiguration?) -> StorageError {
        guard let storage else { return error }
        let path = SQLiteStore.databasePath(inDirectory: storage.directory)
        if case .corrupt = error { return .unusableDatabase(path: path, reason: "\(error)") }
        return SQLiteStore.describingOpenFailure(error, databasePath: path)
    }

    /// What `store` holds, checked against the cluster configuration (`Server.clusterDirectoryProblem`); a
    /// cluster node marks the store as its stream's and, when `SnapshotBootstrap` chooses a snapshot,
    /// installs it in the store (`replaceAll`) before the engine is made from it.
    private static func restore(from store: any Store, _ configuration: ServerConfiguration) throws(StorageError) -> Restored {
        let stored = try store.restore()
        var restored = Restored(state: stored.state, users: stored.users)
        restored.sessions = stored.sessions
        restored.directoryProblem = Server.clusterDirectoryProblem(
            recorded: stored.clusterStream, cluster: configuration.cluster,
            revision: stored.state.revision, classes: stored.state.classes.count)
        guard let cluster = configuration.cluster, restored.directoryProblem == nil else { return restored }
        if stored.clusterStream == nil { try store.recordClusterStream(cluster.stream) }
        restored.appliedSequence = stored.streamSequence
        restored.streamIntegrity = stored.streamIntegrity.flatMap(StreamIntegrity.decodeState)
            ?? .unknown(applied: stored.streamSequence)
        switch Server.bootstrap(cluster, applied: restored.appliedSequence, logger: configuration.logger) {
        case .replay:
            break
        case let .install(snapshot):
            let integrity = snapshot.integrity ?? .unknown(applied: snapshot.sequence)
            try store.replaceAll(with: snapshot.persistedState, streamSequence: snapshot.sequence,
                                 streamIntegrity: StreamIntegrity(integrity).encodedState, users: snapshot.users,
                                 sessions: snapshot.version >= 5 ? snapshot.sessions : nil)
            restored.streamIntegrity = integrity
            restored.state = snapshot.persistedState
            restored.snapshotUsers = snapshot.users
            restored.appliedSequence = snapshot.sequence
            restored.bootstrapSnapshot = snapshot.sequence
            // The replicated sessions are the snapshot's (stored in the same transaction); an older snapshot has none
            // (its stream made none) and the stored ones are left to be rewritten at the first group commit.
            if snapshot.version < 5 { restored.replacedSessionIDs = stored.sessions.map(\.id) }
            restored.sessions = snapshot.presenceSessions
        case let .refuse(reason):
            restored.directoryProblem = reason
        }
        return restored
    }

    /// A store that keeps writes: what it mended while opening (warnings), what was restored, and what of it
    /// the engine could not take (errors).
    private static func logRestore(_ state: PersistedState, engine: KVOEngine, store: any Store, logger: Logger) {
        for note in store.openingNotes { logger.warning("\(PrintableText.escaped(note, limit: 1000))") }
        var metadata: Logger.Metadata = [
            "objects": "\(state.objects.count)", "rev": "\(state.revision)", "history": "\(state.history.count)",
            "classes": "\(state.classes.count)", "bindings": "\(state.bindings.count)", "storedBytes": "\(engine.storedBytes)",
        ]
        metadata.merge(store.logMetadata) { _, stored in stored }
        logger.info("restored", metadata: metadata)
        for problem in engine.restoreProblems {
            logger.error("\(PrintableText.escaped("\(problem)", limit: 1000))")
        }
    }
}

extension ServerConfiguration {
    /// The store this configuration asks for: the SQLite store of `storage.directory` with its background
    /// upkeep on (the server's), or a `MemoryStore` without storage (`--in-memory`). Opening a data
    /// directory throws as `SQLiteStore.init` does.
    func openStore() throws(StorageError) -> any Store {
        guard let storage else { return MemoryStore() }
        let store = try SQLiteStore(directory: storage.directory, sync: storage.sync, historyLimit: historyLimit,
                                    historyByteLimit: historyByteLimit, walLimitBytes: storage.walLimitBytes,
                                    replacesLostDatabase: storage.replacesLostDatabase)
        try store.startBackgroundCheckpoints(delayMilliseconds: storage.checkpointTestDelayMilliseconds)
        store.useReserve(bytes: storage.reserveBytes)
        return store
    }
}
