import KVOJSON
import KVOModel
import Logging
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Backups over the network (docs/protocol.md, "Backups over the network"): `{"op":"backup"}` makes a consistent,
/// checked copy of the database on the thread pool (the copy `kvod backup` makes) and answers what it holds; then
/// `{"op":"backup","offset":N}` answers the chunk at N, in order, until the last one, which carries the SHA-256 of the
/// whole copy. The loop only reads one chunk per request, bounded by the connection's output buffer, and the client
/// asks for the next chunk once it has the last: at most one chunk is queued. One backup at a time
/// (`BackupTransfers`). Loop thread only, like the rest of `Server`.
extension Server {
    /// The last backup streamed whole over the network (when, its revision and size), nil before the first: for
    /// `status` and `kvod_backup_last_*`.
    package var lastBackup: BackupRecord? { metrics.maintenance.lastBackup }

    /// The store's rows (`OperationRoute.storage`): `backup` and `compact`, admitted by their row first (server admins).
    func maintainStorage(_ request: Request, id: JSONValue?, connection: Connection) {
        let declaration = request.operation.declaration
        do throws(KVOError) {
            try declaration.admit(connection.access)
        } catch {
            send(.failure(error), id: id, to: connection, counting: declaration.metrics)
            return
        }
        switch request {
        case .backup(offset: nil): startBackup(id: id, connection: connection)
        case let .backup(offset?): sendBackupChunk(at: offset, id: id, connection: connection)
        case .compact: compact(id: id, connection: connection)
        default: preconditionFailure("\(declaration.name) is routed to the store")
        }
    }

    /// Starts the copy; the connection's later requests wait for its reply.
    func startBackup(id: JSONValue?, connection: Connection) {
        guard let files = store.backupFiles else {
            let error = KVOError(.unsupported, "this kvod keeps nothing on disk (no --data): there is no database to back up")
            send(.failure(error), id: id, to: connection, counting: .backup)
            return
        }
        if let current = backups.current {
            guard current.connection == connection.id else {
                let error = KVOError(.unavailable, "a backup is being taken (by connection \(current.connection)): one at a time; try again when it ends")
                send(.failure(error), id: id, to: connection, counting: .backup)
                return
            }
            // The same connection starting again: its earlier transfer is given up.
            backups.end()
            metrics.maintenance.backupsFailed += 1
        }
        let job = StoreCopyJob(source: files.database, partial: files.partial)
        let client = connection.id
        let started = requestStarted
        guard job.start(on: loop.raw, finished: { [unowned self] job in
            self.backupCopied(job, id: id, connection: client, startedAt: started)
        }) else {
            send(.failure(KVOError(.unavailable, "the backup copy could not be started; try again")), id: id, to: connection, counting: .backup)
            return
        }
        backups.current = BackupTransfers.Transfer(connection: client, phase: .copying(job), lastActivity: clock.milliseconds)
        connection.pauseReading(.maintenance)
        logger.info("backup started", metadata: ["connection": "\(client)", "peer": "\(connection.peer)"])
    }

    /// The copy is made (loop thread): what it holds is the reply, and the transfer waits for the client's chunk
    /// requests; a failed copy is the reply's error.
    func backupCopied(_ job: StoreCopyJob, id: JSONValue?, connection client: ConnectionID, startedAt started: UInt64) {
        guard let connection = connection(client)?.takeUnretainedValue(), !connection.isClosing,
              backups.belongs(to: client), case .copying = backups.current?.phase
        else {
            unlink(job.partial)
            return
        }
        connection.resumeReading(.maintenance)
        continuingRequest(startedAt: started) {
            switch job.result {
            case let .success(summary)?:
                guard let transfer = BackupTransfer(partial: job.partial, summary: summary) else {
                    failBackup("the copy could not be opened for reading", id: id, connection: connection)
                    return
                }
                backups.current?.phase = .sending(transfer)
                backups.current?.lastActivity = clock.milliseconds
                send(.success([("bytes", .int(Int64(transfer.size))), ("chunkBytes", .int(Int64(BackupTransfers.chunkBytes))),
                               ("historyRows", .int(Int64(summary.historyRows))), ("objects", .int(Int64(summary.objects))),
                               ("rev", .int(Int64(summary.revision))), ("schema", .int(summary.schemaVersion))]),
                     id: id, to: connection, counting: .backup)
            case let .failure(error)?:
                failBackup("\(error)", id: id, connection: connection)
            case nil:
                failBackup("the copy did not run", id: id, connection: connection)
            }
        }
    }

    /// Ends the transfer in progress as failed, answering `id` with why.
    private func failBackup(_ why: String, id: JSONValue?, connection: Connection) {
        backups.end()
        metrics.maintenance.backupsFailed += 1
        logger.warning("backup failed: \(PrintableText.escaped(why, limit: 1000))", metadata: ["connection": "\(connection.id)"])
        send(.failure(KVOError(.storageUnavailable, "the backup failed: \(why)")), id: id, to: connection, counting: .backup)
    }

    /// The chunk at `offset`, which must be where the last one ended; the last chunk ends the transfer.
    func sendBackupChunk(at offset: Int64, id: JSONValue?, connection: Connection) {
        guard let current = backups.current, current.connection == connection.id, case let .sending(transfer) = current.phase else {
            let error = KVOError(.badRequest, "no backup is being sent on this connection: start one with {\"op\":\"backup\"}")
            send(.failure(error), id: id, to: connection, counting: .backup)
            return
        }
        guard offset == Int64(transfer.offset) else {
            let error = KVOError(.badRequest, "'offset' \(offset) is not where the next chunk begins (\(transfer.offset) of \(transfer.size) bytes)")
            send(.failure(error), id: id, to: connection, counting: .backup)
            return
        }
        // Base64 takes 4 bytes for 3, and the reply's other members fit in 200 bytes.
        let budget = ReplyBudget(outputLimit: configuration.maximumOutputBufferBytes, queued: connection.outputBytes, id: id)
        let room = (budget.bytes - 200) / 4 * 3
        guard room >= 3 << 10 else {
            send(.failure(budget.refusal("a backup chunk")), id: id, to: connection, counting: .backup)
            return
        }
        let chunk: (base64: String, bytes: Int, sha256: String?)
        do throws(KVOError) {
            chunk = try transfer.nextChunk(maximum: min(BackupTransfers.chunkBytes, room))
        } catch {
            failBackup(error.message, id: id, connection: connection)
            return
        }
        backups.current?.lastActivity = clock.milliseconds
        var fields: [(String, JSONValue)] = [("bytes", .int(Int64(chunk.bytes))), ("data", .string(chunk.base64)), ("offset", .int(offset))]
        if let sha256 = chunk.sha256 {
            fields.append(("sha256", .string(sha256)))
            let summary = transfer.summary
            backups.end()
            metrics.maintenance.backupsCompleted += 1
            metrics.maintenance.lastBackup = BackupRecord(finishedAtMilliseconds: UInt64(max(0, clock.wallMilliseconds)),
                                                          revision: summary.revision, objects: summary.objects, bytes: transfer.size)
            logger.info("backup sent", metadata: [
                "connection": "\(connection.id)", "revision": "\(summary.revision)", "objects": "\(summary.objects)",
                "bytes": "\(transfer.size)", "sha256": "\(sha256)",
            ])
        }
        send(.success(ReplyFields(fields)), id: id, to: connection, counting: .backup)
    }

    /// The connection `client` closed: its transfer, if any, ends (its copy removed, now or when the copy job is done).
    func connectionLeftBackup(_ client: ConnectionID) {
        guard backups.belongs(to: client) else { return }
        backups.end()
        metrics.maintenance.backupsFailed += 1
        logger.info("backup given up: its connection closed", metadata: ["connection": "\(client)"])
    }

    /// The housekeeping tick: a transfer whose client stopped asking for chunks ends.
    func endIdleBackup(now: UInt64) {
        guard backups.isIdle(now: now), let client = backups.current?.connection else { return }
        backups.end()
        metrics.maintenance.backupsFailed += 1
        logger.warning("backup given up: its client asked for no chunk for \(BackupTransfers.idleMilliseconds / 1000) s",
                       metadata: ["connection": "\(client)"])
    }
}
