import CLibUV
import CSQLite
import KVOEngine
import KVOJSON
import KVOModel

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Group commit: one transaction per batch, and the diagnostics tests read the database with.
/// Loop thread (or the thread that opened it), like the rest of `SQLiteStore`.
extension SQLiteStore {
    /// Writes one batch in one transaction: each object the batch touched gets its final value (or
    /// is deleted), every entry becomes a history row, each class and binding is stored (a nil binding
    /// deletes its row), `batch.revision` becomes the stored revision, the binding id counter rises to
    /// `batch.lastBindingID` (it never goes down), and history is trimmed to its limits.
    ///
    /// A batch that changes nothing and moves neither counter costs nothing. On error the transaction
    /// is rolled back and nothing of the batch is stored.
    package func commit(_ batch: CommitBatch) throws(StorageError) {
        guard let statements else { throw .closed }
        let movesRevision = batch.revision != storedRevision
        let raisesLastBindingID = batch.lastBindingID > storedLastBindingID
        if batch.entries.isEmpty && batch.objects.isEmpty && batch.classes.isEmpty && batch.bindings.isEmpty
            && batch.users.isEmpty && batch.expiries.isEmpty && batch.sessions.isEmpty && !movesRevision && !raisesLastBindingID && batch.streamSequence == nil { return }
        let keepHistory = historyLimit > 0
        var appended = 0
        // What this batch does to each object's log; merged into `objectLogs` once the batch is committed.
        var logs: [String: ObjectLog] = [:]
        // Each object's last change in this batch: its snapshot's `rev` if it gets one. An object given
        // without a write of its own keeps 0 (unknown), as a store of an older version has it.
        var lastChange: [String: UInt64] = [:]
        do throws(StorageError) {
            try statements.begin.run()
            // Each change once as text: a history row, and a redo row unless its object gets a new snapshot.
            var lastObject: String?
            var lastLog = ObjectLog(snapshotBytes: 0, redoBytes: 0)
            var runRev: UInt64 = 0
            // The objects written so far in the current revision, kept only for a revision of several entries
            // (a batch's): a second write to one of them would repeat its redo row's key (object, rev).
            var objectsInRevision = Set<String>()
            let entries = batch.entries
            for index in entries.indices {
                let entry = entries[index]
                changeText.removeAll(keepingCapacity: true)
                entry.writeChangeJSON(into: &changeText)
                if keepHistory {
                    // History goes forward: a revision's rows together, after every row kept (what `load` checks).
                    if let newest = ledger.newestRevision, entry.rev < newest || (entry.rev == newest && index == 0) {
                        throw StorageError.corrupt(row: "history rev \(entry.rev)",
                                                   reason: "a commit's revision must come after the stored history's \(newest)")
                    }
                    let insert = statements.insertHistory
                    try insert.bind(1, Int64(bitPattern: entry.rev))
                    try insert.bind(2, text: entry.object)
                    try insert.bind(3, text: changeText)
                    try insert.bind(4, Int64(changeText.count))
                    let sequence = ledger.nextSequence()
                    try insert.bind(5, sequence)
                    try insert.run()
                    ledger.append(sequence: sequence, revision: entry.rev, bytes: changeText.count)
                    appended += 1
                }
                // Runs of writes to one object (the common case) look its log up once.
                if lastObject != entry.object {
                    if let lastObject {
                        logs[lastObject] = lastLog
                        lastChange[lastObject] = runRev
                    }
                    lastObject = entry.object
                    if let log = logs[entry.object] ?? objectLogs[entry.object] {
                        lastLog = log
                    } else {
                        lastLog = try storedLog(of: entry.object)
                    }
                }
                var writtenInRevision = false
                if (index > 0 && entries[index - 1].rev == entry.rev) || (index + 1 < entries.count && entries[index + 1].rev == entry.rev) {
                    if index == 0 || entries[index - 1].rev != entry.rev { objectsInRevision.removeAll(keepingCapacity: true) }
                    writtenInRevision = !objectsInRevision.insert(entry.object).inserted
                }
                runRev = entry.rev
                guard !lastLog.takesSnapshot else { continue }
                // A creation or deletion replaces the object: a snapshot (decided without decoding the change).
                if entry.isCreation || entry.isDeletion || writtenInRevision
                    || lastLog.redoBytes + changeText.count > lastLog.snapshotBytes {
                    lastLog.takesSnapshot = true
                } else {
                    try statements.insertRedo.bind(1, text: entry.object)
                    try statements.insertRedo.bind(2, Int64(bitPattern: entry.rev))
                    try statements.insertRedo.bind(3, text: changeText)
                    try statements.insertRedo.run()
                    lastLog.redoBytes += changeText.count
                }
            }
            if let lastObject {
                logs[lastObject] = lastLog
                lastChange[lastObject] = runRev
            }
            // An object given without a write of its own (callers other than the engine) is stored whole.
            for id in batch.objects.keys where logs[id] == nil {
                var log: ObjectLog
                if let known = objectLogs[id] { log = known } else { log = try storedLog(of: id) }
                log.takesSnapshot = true
                logs[id] = log
            }
            for (id, log) in logs where log.takesSnapshot {
                guard let final = batch.objects[id] else {
                    // No final value given (only the engine's batches are complete): the rows stay as they are.
                    logs.removeValue(forKey: id)
                    continue
                }
                // The redo rows go (any written above in this batch too): the snapshot holds them.
                if log.redoBytes > 0 || log.hasUnknownRedo {
                    try statements.deleteRedo.bind(1, text: id)
                    try statements.deleteRedo.run()
                }
                switch final {
                case let .present(value):
                    valueText.removeAll(keepingCapacity: true)
                    JSONWriter.write(value, into: &valueText)
                    try statements.upsertObject.bind(1, text: id)
                    try statements.upsertObject.bind(2, text: valueText)
                    try statements.upsertObject.bind(3, Int64(bitPattern: lastChange[id] ?? 0))
                    try statements.upsertObject.run()
                    logs[id] = ObjectLog(snapshotBytes: valueText.count, redoBytes: 0)
                case .deleted:
                    try statements.deleteObject.bind(1, text: id)
                    try statements.deleteObject.run()
                    logs[id] = ObjectLog(snapshotBytes: 0, redoBytes: 0, isDeleted: true)
                }
            }
            try write(classes: batch.classes, bindings: batch.bindings, statements)
            for (object, expiry) in batch.expiries {
                if let expiry {
                    try statements.upsertExpiry.bind(1, text: object)
                    try statements.upsertExpiry.bind(2, expiry.ttl)
                    try statements.upsertExpiry.bind(3, expiry.deadline)
                    try statements.upsertExpiry.run()
                } else {
                    try statements.deleteExpiry.bind(1, text: object)
                    try statements.deleteExpiry.run()
                }
            }
            for (id, record) in batch.sessions {
                if let record {
                    try statements.upsertSession.bind(1, text: id)
                    try statements.upsertSession.bind(2, text: JSONWriter.bytes(record))
                    try statements.upsertSession.run()
                } else {
                    try statements.deleteSession.bind(1, text: id)
                    try statements.deleteSession.run()
                }
            }
            if !batch.users.isEmpty {
                let names = batch.users.keys.sorted()
                try writeUserRows(upserting: names.compactMap { batch.users[$0] ?? nil },
                                  deleting: names.filter { batch.users[$0]! == nil })
            }
            if raisesLastBindingID {
                try statements.setLastBindingID.bind(1, Int64(bitPattern: batch.lastBindingID))
                try statements.setLastBindingID.run()
            }
            if movesRevision {
                try statements.setRevision.bind(1, Int64(bitPattern: batch.revision))
                try statements.setRevision.run()
            }
            if let sequence = batch.streamSequence {
                try statements.setStreamSequence.bind(1, Int64(bitPattern: sequence))
                try statements.setStreamSequence.run()
            }
            if let integrity = batch.streamIntegrity {
                try statements.setStreamIntegrity.bind(1, text: integrity)
                try statements.setStreamIntegrity.run()
            }
            let drop = ledger.rowsToDrop(limit: historyLimit, byteLimit: historyByteLimit)
            if drop > 0 {
                try statements.trimHistory.bind(1, ledger.sequence(at: drop - 1))
                try statements.trimHistory.run()
            }
            try statements.commit.run()
            ledger.removeFirst(drop)
            for (id, log) in logs {
                if log.isDeleted { objectLogs.removeValue(forKey: id) } else { objectLogs[id] = log }
            }
            storedRevision = batch.revision
            storedLastBindingID = max(storedLastBindingID, batch.lastBindingID)
        } catch {
            ledger.removeLast(appended)
            if database?.isInTransaction == true { try? statements.rollback.run() }
            throw error
        }
        blockingCheckpoint = nil
        if walBytes > walLimitBytes {
            let bytes = walBytes
            blockingCheckpoint = (bytes, checkpointBlocking())
        }
    }

    /// Upserts each class and binding definition as compact JSON and deletes each removed binding;
    /// part of `commit`'s transaction.
    func write(classes: [String: JSONValue], bindings: [UInt64: JSONValue?],
                       _ statements: Statements) throws(StorageError) {
        for (name, definition) in classes {
            valueText.removeAll(keepingCapacity: true)
            JSONWriter.write(definition, into: &valueText)
            try statements.upsertClass.bind(1, text: name)
            try statements.upsertClass.bind(2, text: valueText)
            try statements.upsertClass.run()
        }
        for (id, definition) in bindings {
            if let definition {
                valueText.removeAll(keepingCapacity: true)
                JSONWriter.write(definition, into: &valueText)
                try statements.upsertBinding.bind(1, Int64(bitPattern: id))
                try statements.upsertBinding.bind(2, text: valueText)
                try statements.upsertBinding.run()
            } else {
                try statements.deleteBinding.bind(1, Int64(bitPattern: id))
                try statements.deleteBinding.run()
            }
        }
    }

    // MARK: - Diagnostics

    /// History rows on disk and their total `bytes`, as the store tracks them in memory.
    var historyRowCount: Int { ledger.count }
    var historyByteTotal: Int { ledger.totalBytes }

    /// The value of `PRAGMA <name>` on the store's connection (`synchronous` reads "2", "1" or "0").
    func pragma(_ name: String) throws(StorageError) -> String {
        try queryText("PRAGMA \(name)")
    }

    /// The first column of the first row of `sql` on the store's connection, as text ("" for none).
    func queryText(_ sql: String) throws(StorageError) -> String {
        guard let database else { throw .closed }
        let query = try database.prepare(sql)
        defer { query.finalize() }
        return try query.step() ? query.string(0) : ""
    }
}
