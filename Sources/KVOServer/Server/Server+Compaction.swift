import KVOJSON
import KVOModel
import Logging

/// `compact` and the automatic incremental vacuum (docs/design.md, "Reclaiming space"): free pages of the database
/// given back to the file system in bounded steps on housekeeping ticks (`SpaceReclaimer`), never a whole `VACUUM`
/// on the loop. A `compact` waits for its compaction (the connection's later requests after it), which ends with the
/// write-ahead log checkpointed and truncated, and answers the bytes on disk before and after. Taken while the store
/// is past `--max-disk` (that is when it is needed); refused while its files are lost or failing. Loop thread only,
/// like the rest of `Server`.
extension Server {
    /// Joins or begins a compaction; answered when it ends.
    func compact(id: JSONValue?, connection: Connection) {
        guard let pages = store.pages() else {
            let error = KVOError(.unsupported, "this kvod keeps nothing on disk (no --data): there is nothing to compact")
            send(.failure(error), id: id, to: connection, counting: .compact)
            return
        }
        guard pages.incremental else {
            let error = KVOError(.unavailable, "the database could not be switched to incremental vacuum when kvod started (its log says why): "
                                 + "restart kvod with about the database's size free on its file system")
            send(.failure(error), id: id, to: connection, counting: .compact)
            return
        }
        if let refusal = compactionRefusal {
            send(.failure(refusal), id: id, to: connection, counting: .compact)
            return
        }
        reclaimer.add(SpaceReclaimer.Waiter(connection: connection.id, id: id, startedAt: requestStarted),
                      bytesOnDisk: store.bytesOnDisk())
        connection.pauseReading(.maintenance)
    }

    /// Why no page can be given back now: the store's files lost, or failing (nil while writable or only full).
    private var compactionRefusal: KVOError? {
        switch storage.health {
        case .writable, .full: return nil
        case .failing, .lost: return storage.refusal
        }
    }

    /// The housekeeping tick: a step of the compaction in progress; otherwise, once a second (`secondTick`), a step of
    /// the automatic vacuum when enough pages are free (`SpaceReclaimer.isWorthReclaiming`).
    func reclaimSpaceOnTick(secondTick: Bool) {
        guard storage.keepsWrites else { return }
        if reclaimer.isCompacting {
            compactionStep()
            return
        }
        guard secondTick, compactionRefusal == nil, let pages = store.pages(), SpaceReclaimer.isWorthReclaiming(pages) else { return }
        do throws(StorageError) {
            let after = try store.reclaimSpace(pages: SpaceReclaimer.automaticStepPages)
            metrics.maintenance.pagesReclaimed += UInt64(max(0, pages.freePages - after.freePages))
            // The WAL's usual upkeep (a background checkpoint once it is large), which also cuts the file short.
            if let notice = store.afterCommit(on: loop.raw) { logger.log(level: notice.level, "\(notice.message)") }
        } catch {
            logger.debug("automatic vacuum step failed: \(error)")
        }
    }

    /// One step of the compaction in progress; the last one (no free page left, or none given back) ends it.
    private func compactionStep() {
        if let refusal = compactionRefusal { return finishCompaction(refusal) }
        guard let before = store.pages() else { return finishCompaction(KVOError(.storageUnavailable, "the database's pages cannot be read")) }
        let after: StorePages
        do throws(StorageError) {
            after = try store.reclaimSpace(pages: SpaceReclaimer.compactStepPages)
        } catch {
            return finishCompaction(KVOError(.storageUnavailable, "compaction failed: \(error)"))
        }
        let reclaimed = max(0, before.freePages - after.freePages)
        reclaimer.pagesReclaimed += reclaimed
        metrics.maintenance.pagesReclaimed += UInt64(reclaimed)
        if after.freePages == 0 || reclaimed == 0 { finishCompaction(nil) }
    }

    /// Ends the compaction: the WAL checkpointed and truncated (the file shrinks now), every waiting `compact`
    /// answered (or refused with `error`), and the store asked at once whether it is below `--max-disk` again.
    private func finishCompaction(_ error: KVOError?) {
        let logTruncated = error == nil && store.shrinkLog()
        let bytesAfter = store.bytesOnDisk()
        let freePages = store.pages()?.freePages ?? 0
        let bytesBefore = reclaimer.bytesBefore
        let pagesReclaimed = reclaimer.pagesReclaimed
        let waiters = reclaimer.finish()
        if error == nil {
            metrics.maintenance.compactions += 1
            logger.info("compacted", metadata: [
                "pagesReclaimed": "\(pagesReclaimed)", "bytesBefore": "\(bytesBefore)", "bytesAfter": "\(bytesAfter)",
            ])
        }
        let reply: Result<ReplyFields, KVOError> = error.map { .failure($0) } ?? .success([
            ("bytesAfter", .int(Int64(bytesAfter))), ("bytesBefore", .int(Int64(bytesBefore))), ("freePages", .int(Int64(freePages))),
            ("logTruncated", .bool(logTruncated)), ("pagesReclaimed", .int(Int64(pagesReclaimed))),
        ])
        for waiter in waiters {
            guard let connection = connection(waiter.connection)?.takeUnretainedValue(), !connection.isClosing else { continue }
            send(reply, id: waiter.id, to: connection, counting: .compact, startedAt: waiter.startedAt)
            connection.resumeReading(.maintenance)
        }
        if storage.health != .writable {
            storage.checkAtNextTick()
            checkStorage()
        }
    }
}
