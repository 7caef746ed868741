import KVOJSON
import KVOModel

/// Batches: several writes applied all or nothing, with one revision and one notification pass
/// (docs/design.md, "Writes that compose"). Loop thread only, like the rest of `KVOEngine`.
///
/// Between `beginBatch()` and `commitBatch(notifications:)` every write (`create`, `set`, `delete`, the
/// array changes, `increment`: everything that reaches `commit`, `commitText` or `delete`) is applied to
/// the store at once, so that a later part reads what an earlier one wrote (its conditions included), but
/// it advances no revision, records no history and notifies nobody: `BatchWrite` keeps what undoes it and
/// what the watched paths read before it. `commitBatch` then advances the revision once, records every
/// part's change with it, and runs one notification pass comparing each affected path with its reading
/// before the batch, so that no observer sees a state between two parts (a computed value reading two
/// objects changes once). Bindings the batch triggers run after it, each with its own revision, as after
/// any write. `abortBatch()` puts every touched object back as it was.
extension KVOEngine {
    /// Most parts a batch may have (`too_large` beyond).
    public static let maximumBatchParts = 1_000

    /// Starts a batch. The revision counter must have room for one more revision.
    public func beginBatch() throws(KVOError) {
        precondition(batch == nil, "a batch is being applied already")
        try checkRevisionRoom()
        batch = BatchWrite(revision: revision + 1, storedBytes: storedBytes, removedWatched: removedWatchedObjects.count)
    }

    /// Undoes every part applied since `beginBatch()`: each touched object is put back as it was (or removed
    /// when it did not exist), with the stored-bytes count. Nothing was recorded or notified.
    public func abortBatch() {
        guard let batch else { return }
        self.batch = nil
        for object in batch.touchOrder.reversed() {
            restore(object, slot: batch.savedSlots[object]!)
        }
        restoreExpiries(batch.savedExpiries)
        // The watched objects its parts removed are back: their removals did not happen.
        if removedWatchedObjects.count > batch.removedWatchedBefore {
            removedWatchedObjects.removeSubrange(batch.removedWatchedBefore...)
        }
        storedBytes = batch.storedBytesBefore
        measuredChangeSize = nil
        computedMemo.invalidate()
    }

    /// Ends the batch: one revision for all its parts (history and the commit batch get every part's change
    /// with it), then one notification pass, then the bindings it triggered. Returns the batch's revision
    /// (the current one when no part wrote anything).
    public func commitBatch(notifications: inout [ChangeNotification]) -> UInt64 {
        guard let batch else { return revision }
        self.batch = nil
        guard !batch.entries.isEmpty else { return revision }
        revision = batch.revision
        for entry in batch.entries { record(entry.object, entry) }
        var priors: [ChangeNotification] = []
        var changes: [ChangeNotification] = []
        var ended: [String: [WatchedPath]] = [:]
        let pendingStart = bindingTable.pending.count
        for (path, before) in batch.captured {
            if batch.touched(path.object), !objects.contains(path.object) {
                // Its object is gone at the end of the batch: the observation ends, as a `delete` ends it.
                ended[path.object, default: []].append(path)
                guard !path.subscribers.isEmpty else { continue }
                appendPrior(for: path, kind: .setting, old: before.value, indexes: nil, reason: .sourceDeleted, to: &priors)
                changes.append(ChangeNotification(
                    object: path.object, keyPath: path.keyPath.string, reason: .sourceDeleted, rev: revision,
                    kind: .setting, isPrior: false, old: before.value, new: .null, recipients: path.recipients))
                continue
            }
            // An aggregate cache follows one change at a time: read the path again instead.
            path.aggregate = nil
            let arrayChange = before.location.flatMap { batch.onlyArrayChange(of: $0.object) }
            reread(path, before: before, change: arrayChange?.change, at: arrayChange?.location,
                   priors: &priors, changes: &changes)
        }
        if bindingTable.pending.count - pendingStart > 1 { bindingTable.pending[pendingStart...].sort { $0.id < $1.id } }
        for object in batch.touchOrder {
            guard let watch = batch.patternWatches[object] else { continue }
            let existedBefore = batch.existedBefore(object)
            let exists = objects.contains(object)
            let write: PatternEvents.Write
            switch (existedBefore, exists) {
            case (false, true): write = .created
            case (true, false): write = .deleted
            case (true, true):
                let arrayChange = batch.onlyArrayChange(of: object)
                write = .changed(arrayChange?.change, at: arrayChange?.location ?? StoredLocation(object: object, path: []))
            case (false, false): continue
            }
            notifyPatterns(watch, of: write, to: object, priors: &priors, changes: &changes)
        }
        notifications.append(contentsOf: priors)
        notifications.append(contentsOf: changes)
        for object in batch.touchOrder where batch.existedBefore(object) && !objects.contains(object) {
            let paths = ended[object] ?? []
            for path in paths { registry.drop(path) }
            removeBindings(endedWith: paths, deletedObject: object)
        }
        applyPendingBindings(notifications: &notifications)
        return batch.revision
    }

    // MARK: - Parts (called by `commit`, `commitText` and `delete` while a batch is applied)

    /// Before a part writes at `location`: saves its object's slot at the batch's first touch, with its
    /// pattern observations' readings, and reads every watched path the location can affect that no earlier
    /// part did.
    private func prepare(_ batch: BatchWrite, at location: StoredLocation) {
        if batch.save(location.object, slot: objects.slot(of: location.object)),
           !registry.patterns.isEmpty, let watch = patternWatch(for: location.object) {
            batch.patternWatches[location.object] = watch
        }
        for path in registry.watchers(affectedBy: location) {
            batch.capture(path) { currentReading(path) }
        }
    }

    /// `commit`'s part in a batch: applied and kept for the batch's history, nobody notified.
    func commitInBatch(_ batch: BatchWrite, at location: StoredLocation,
                       _ write: () throws(KVOError) -> RecordedChange) throws(KVOError) -> UInt64 {
        prepare(batch, at: location)
        stampNextWrite()
        let recorded = try write()
        computedMemo.invalidate()
        batch.noteWrite(to: location.object, recorded)
        batch.entries.append(HistoryEntry(rev: batch.revision, object: location.object, change: recorded,
                                          changeSize: takeMeasuredChangeSize()))
        if !expiries.isEmpty { refreshExpiry(of: location.object) }
        return batch.revision
    }

    /// `commitText`'s part in a batch.
    func commitTextInBatch(_ batch: BatchWrite, at location: StoredLocation, text: CanonicalText,
                           _ write: () throws(KVOError) -> HeldValue?) throws(KVOError) -> UInt64 {
        prepare(batch, at: location)
        stampNextWrite()
        let old = try write()
        computedMemo.invalidate()
        batch.noteTextWrite(to: location.object)
        batch.entries.append(HistoryEntry(rev: batch.revision, object: location.object, setAt: location.path, old: old,
                                          new: text, changeSize: takeMeasuredChangeSize()))
        if !expiries.isEmpty { refreshExpiry(of: location.object) }
        return batch.revision
    }

    /// `delete`'s part in a batch (`object` exists, its size is `size`).
    func deleteInBatch(_ batch: BatchWrite, _ object: String, size: Int) -> UInt64 {
        let location = StoredLocation(object: object, path: [])
        prepare(batch, at: location)
        let previous = removeObject(object, size: size)
        computedMemo.invalidate()
        let change = RecordedChange.deleted(previous)
        batch.noteWrite(to: object, change)
        batch.entries.append(HistoryEntry(rev: batch.revision, object: object, change: change))
        return batch.revision
    }
}
