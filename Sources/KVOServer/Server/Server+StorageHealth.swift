import CLibUV
import KVOEngine
import KVOJSON
import KVOModel
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// When the store cannot write (docs/design.md, "When the store cannot write"): a failed group commit,
/// a lost database file or `--max-disk` puts the server in a `StorageHealth` other than `.writable`
/// instead of stopping it. Writes are then refused at the operations table's door (`StorageStatus.refusal`,
/// read by `handleLine`), reads, observations and resumes go on, and every second the housekeeping tick
/// asks the store whether writes can be taken again. Nothing is acknowledged that is not stored: output
/// about an iteration's writes waits for its commit, and a commit that cannot be made is either made
/// after all (the reserve given back) or undone (`rollBackToLastCommit`). Loop thread only, like the rest
/// of `Server`.
extension Server {
    /// Group commit of `batch`, with what a failure leads to. Returns normally when the batch is stored, or
    /// when it could not be and the server's state was rolled back to the last commit (the iteration's
    /// writes undone, their writers and observers disconnected without a word about them). Stops the
    /// server only when the store may hold something unknown (`StorageFailure.unknown`).
    func commitOrRollBack(_ batch: CommitBatch) {
        if let problem = store.filesProblem() {
            // A commit into a deleted or replaced file would be acknowledged and lost.
            metrics.storage.failed(.lost)
            enterStorageHealth(.lost(problem), level: .critical)
            rollBackToLastCommit(because: problem)
            return
        }
        var attempt = 0
        while true {
            do throws(StorageError) {
                // Real time, not `clock`: the metric measures the real commit (docs/design.md, "The clock").
                let started = uv_hrtime()
                try store.commit(batch)
                if let sequence = batch.streamSequence { cluster?.committedSequence = sequence }
                let took = uv_hrtime() &- started
                metrics.groupCommitted(nanoseconds: took)
                slowLog.activity.commits += 1
                slowLog.activity.commitNanoseconds &+= took
                if let notice = store.afterCommit(on: loop.raw) { logger.log(level: notice.level, "\(notice.message)") }
                checkDiskLimit()
                return
            } catch {
                let failure = store.assess(error)
                // Out of space, the reserve given back, the same batch once more: stored, it is acknowledged,
                // and the writes after it are refused until the reserve can be made again.
                let retries: Bool
                if case .outOfSpace = failure, attempt == 0 { retries = store.releaseReserve() } else { retries = false }
                let revisions = batch.entries.first.map { "revisions \($0.rev)...\(batch.revision)" } ?? "class or binding definitions"
                let why = refuseWrites(after: failure, persisting: revisions,
                                       detail: retries ? "the reserve was released to store the writes in progress" : nil)
                if retries {
                    attempt += 1
                    continue
                }
                rollBackToLastCommit(because: why)
                return
            }
        }
    }

    /// A failed commit, user write or probe (`failure`, as `Store.assess` judged it): counted, and writes
    /// refused from now on (`.full` out of space, `.failing` otherwise), or, when the store may hold part of
    /// a transaction (`.unknown`), kvod stops (exit 74) with `what` it was persisting and the reason logged,
    /// acknowledging nothing. Returns the reason, for the caller's rollback. `counts`: false for the probe
    /// repeated every second while writes are refused (the failure was counted when they started to be).
    @discardableResult
    func refuseWrites(after failure: StorageFailure, persisting what: String, detail: String? = nil,
                      counts: Bool = true) -> String {
        if counts { metrics.storage.failed(StorageMetrics.ErrorKind(failure)) }
        switch failure {
        case let .outOfSpace(why):
            enterStorageHealth(.full(why), level: .error, detail: detail)
            return why
        case let .consistent(why):
            enterStorageHealth(.failing(why), level: .error, detail: detail)
            return why
        case let .unknown(why):
            logger.critical("cannot persist \(what): \(PrintableText.escaped(why, limit: 1000)); the database may hold part of it, so kvod stops without acknowledging it (restart it to recover)")
            exit(74)  // EX_IOERR
        }
    }

    /// Moves to `health` (from `.writable`, or from one refusal to a graver one) and says so once.
    func enterStorageHealth(_ health: StorageHealth, level: Logger.Level, detail: String? = nil, overDiskLimit: Bool = false) {
        let (moved, wasWritable) = storage.move(to: health, overDiskLimit: overDiskLimit)
        guard moved else { return }
        metrics.storage.health = health.gaugeValue
        guard let reason = health.reason else { return }
        let then = detail.map { "; \($0)" } ?? ""
        let recovery: String
        switch health {
        case .full where overDiskLimit:
            recovery = "delete objects (deletes are still taken) and compact (kvoclient compact), or raise --max-disk; writes resume by themselves"
        case .full: recovery = "free space on the data directory's file system (or raise --max-disk); writes resume by themselves"
        case .failing: recovery = "writes resume by themselves once a probe write succeeds"
        // True after issue 42: the stop sets this kvod's log aside, and no start applies a log to another file.
        case .lost, .writable:
            recovery = "stop kvod (it then sets its write-ahead log aside, so that no start applies it to another file), "
                + "put the database to keep in place (the file there now, or a backup: kvod restore --replace) and start kvod again"
        }
        logger.log(level: level, "\(PrintableText.escaped(reason, limit: 1000))\(then); \(wasWritable ? "refusing writes" : "still refusing writes") (reads and observations go on): \(recovery)")
    }

    /// Undoes what the engine accepted since the last commit: the state restored from the store (which
    /// holds exactly the last commit), every client connection closed with what it had queued (replies
    /// and events about the undone writes never leave), and in cluster mode the stream position and users
    /// of the last commit. Clients reconnect, and observers resume from their last revision: nothing they
    /// were told is undone. Rare (a commit that failed even with the reserve given back); the price is one
    /// reconnection of every client.
    func rollBackToLastCommit(because reason: String) {
        let contents: StoreContents
        do throws(StorageError) {
            contents = try store.restore()
        } catch {
            logger.critical("cannot read back the last commit after a failed one (\(PrintableText.escaped("\(error)", limit: 1000))); stopping")
            exit(74)  // EX_IOERR
        }
        let engine = makeEngine(restoring: contents.state)
        let closed = closeClientConnections(reason: .storageRolledBack)
        handler.engine = engine
        if let cluster {
            users.replaceAll(with: Array(contents.users.records.values))
            compiledPolicies.forgetAll()
            cluster.appliedSequence = contents.streamSequence
            cluster.committedSequence = contents.streamSequence
            cluster.integrity.reset(to: contents.streamIntegrity.flatMap(StreamIntegrity.decodeState)
                                        ?? .unknown(applied: contents.streamSequence))
            cluster.awaitingStorage = true
        }
        uncommittedUsers.removeAll()
        // The sessions as last committed (the connections are closed: every one is detached).
        restoreSessions(contents.sessions)
        metrics.storage.rolledBack()
        logger.error("rolled back to the last commit (revision \(engine.revision)) after a failed one: \(closed) connection\(closed == 1 ? "" : "s") closed without the replies and events of the writes undone")
    }

    /// An engine restored from `state`, with the server's limits and its bindings' rules (start-up's,
    /// a cluster snapshot's install and a roll-back's).
    func makeEngine(restoring state: PersistedState) -> KVOEngine {
        let engine = KVOEngine(restoring: state, historyLimit: configuration.historyLimit,
                               historyByteLimit: configuration.historyByteLimit, recordsCommitBatches: storage.keepsWrites)
        engine.sizeLimits = configuration.sizeLimits
        engine.maximumObservationsPerConnection = configuration.maximumObservationsPerConnection
        engine.creatorPolicy = handler.engine.creatorPolicy
        return engine
    }

    /// Closes every client connection for `reason` (HTTP requests and WebSocket sessions too), dropping
    /// what each had queued. How many.
    @discardableResult
    func closeClientConnections(reason: CloseReason) -> Int {
        let open = openConnections
        for connection in slots.compactMap({ $0?.takeUnretainedValue() }) where !connection.isClosing {
            connection.close(reason: reason)
        }
        return open
    }

    /// After a commit: past `--max-disk`, writes are refused (the batch just stored is acknowledged).
    func checkDiskLimit() {
        guard let limit = configuration.storage?.maximumDiskBytes, limit > 0 else { return }
        let used = store.bytesOnDisk()
        metrics.storage.bytesOnDisk = used
        // Already refusing for the limit: the writes that free space, taken meanwhile, say nothing more.
        if used >= limit, !storage.isOverDiskLimit {
            if case .full = storage.health {} else { metrics.storage.failed(.full) }
            enterStorageHealth(.full("the database and its WAL take \(used) bytes, --max-disk is \(limit)"), level: .error,
                               overDiskLimit: storage.health == .writable)
        }
    }

    /// Start-up: a probe write (which also makes the reserve). A store without room starts refusing
    /// writes (a restart on a full disk serves reads instead of dying at its first write).
    func checkStorageAtStart() {
        guard storage.keepsWrites else { return }
        do throws(StorageError) {
            try store.probeWritable()
        } catch {
            refuseWrites(after: store.assess(error), persisting: "the start-up probe write")
        }
        checkDiskLimit()
    }

    /// Start-up, and the housekeeping tick while writes are refused: asks the store whether writes can be
    /// taken again (its reserve made, a probe write stored, the files below `--max-disk`), and takes them
    /// again if so. While writable, the tick only checks that the database file is still there.
    func checkStorage() {
        guard storage.keepsWrites else { return }
        if let problem = store.filesProblem() {
            if storage.health != .lost(problem) { metrics.storage.failed(.lost) }
            enterStorageHealth(.lost(problem), level: .critical)
            return
        }
        let limit = configuration.storage?.maximumDiskBytes ?? 0
        if limit > 0 { metrics.storage.bytesOnDisk = store.bytesOnDisk() }
        switch storage.health {
        case .writable, .lost:
            return
        case .full, .failing:
            break
        }
        if limit > 0, metrics.storage.bytesOnDisk >= limit {
            guard !storage.isOverDiskLimit else { return }
            // Only the limit refuses once the file system has room (a probe is stored): deletes are then taken.
            do throws(StorageError) {
                try store.probeWritable()
            } catch {
                refuseWrites(after: store.assess(error), persisting: "the probe write", counts: false)
                return
            }
            enterStorageHealth(.full("the database and its WAL take \(metrics.storage.bytesOnDisk) bytes, --max-disk is \(limit)"),
                               level: .error, overDiskLimit: true)
            return
        }
        do throws(StorageError) {
            try store.probeWritable()
        } catch {
            refuseWrites(after: store.assess(error), persisting: "the probe write", counts: false)
            return
        }
        let was = storage.becomeWritable()
        metrics.storage.health = 0
        logger.notice("storage writable again (was \(PrintableText.escaped(was, limit: 300))): taking writes")
        if let cluster, cluster.awaitingStorage {
            cluster.awaitingStorage = false
            resubscribe(cluster)
        }
    }
}

extension StorageMetrics.ErrorKind {
    /// The kind a failed commit or probe counts as.
    init(_ failure: StorageFailure) {
        switch failure {
        case .outOfSpace: self = .full
        case .consistent: self = .io
        case .unknown: self = .unknown
        }
    }
}
