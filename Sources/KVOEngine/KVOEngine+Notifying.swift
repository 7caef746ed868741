import KVOJSON
import KVOModel

/// Every write's commit: the watched paths it may affect read before and after, and the notifications of those that changed (the per-write hot path).
/// Loop thread only, like the rest of `KVOEngine`.
extension KVOEngine {
    /// Applies one write at `location` and notifies every watched path whose reading it changed.
    /// `encodedWrite`: for a `set`, its value's `JSONWriter` bytes when already known.
    func commit(at location: StoredLocation, encodedWrite: [UInt8]? = nil, notifications: inout [ChangeNotification],
                        _ write: () throws(KVOError) -> RecordedChange) throws(KVOError) -> UInt64 {
        try commit(at: location, encodedWrite: encodedWrite, notifications: &notifications) { () throws(KVOError) in
            AppliedWrite.change(try write())
        }
    }

    /// What a write did, for `commit` to record: a change held decoded, or a `set` of a top-level key whose
    /// new value is held as text (`writeText`).
    enum AppliedWrite {
        case change(RecordedChange)
        case textSet(path: [String], old: HeldValue?, new: CanonicalText)
    }

    func commit(at location: StoredLocation, encodedWrite: [UInt8]? = nil, notifications: inout [ChangeNotification],
                _ write: () throws(KVOError) -> AppliedWrite) throws(KVOError) -> UInt64 {
        try checkRevisionRoom()
        let candidates = registry.watchers(affectedBy: location)
        let before = candidates.map(currentReading)
        // Pattern observations matching the object: one check when there are none.
        let patternWatch = registry.patterns.isEmpty ? nil : patternWatch(for: location.object)
        let applied = try write()
        computedMemo.invalidate()
        revision += 1
        var change: CollectionChange?
        var written: HeldValue?
        var created = false
        switch applied {
        case let .change(recorded):
            switch recorded {
            case let .array(array):
                change = CollectionChange(kind: array.kind, indexes: array.indexes, old: array.old, new: array.new)
            case let .set(_, _, new):
                written = .decoded(new)
            case .created:
                created = true
            case .deleted:
                break
            }
            record(location.object, recorded)
        case let .textSet(path, old, new):
            written = .text(new)
            record(location.object, HistoryEntry(rev: revision, object: location.object, setAt: path, old: old, new: new,
                                                 changeSize: takeMeasuredChangeSize()))
        }
        guard !candidates.isEmpty || patternWatch != nil else { return revision }
        // Ordinary notifications go straight to the caller's array (no array of their own per write);
        // prior ones, rarely asked for, are collected apart and put before them.
        let start = notifications.count
        var priors: [ChangeNotification] = []
        let pendingStart = bindingTable.pending.count
        for (path, old) in zip(candidates, before) {
            if let written, path.readsOnlyStoredValue(at: location) {
                rereadPlain(path, before: old, written: written, encoded: encodedWrite, at: location, priors: &priors,
                            changes: &notifications)
            } else {
                reread(path, before: old, change: change, at: location, priors: &priors, changes: &notifications)
            }
        }
        // The bindings this write triggered apply in id order: the candidates' order follows when their
        // watched paths were made, which local observations change (a cluster node must not depend on it).
        if bindingTable.pending.count - pendingStart > 1 { bindingTable.pending[pendingStart...].sort { $0.id < $1.id } }
        if let patternWatch {
            notifyPatterns(patternWatch, of: created ? .created : .changed(change, at: location), to: location.object,
                           priors: &priors, changes: &notifications)
        }
        if !priors.isEmpty { notifications.insert(contentsOf: priors, at: start) }
        return revision
    }

    /// `reread` for the common observation (`v`, `address.city` of its own object) after a `set` of
    /// exactly the key it reads (`WatchedPath.readsOnlyStoredValue(at:)`): what `read(path)` would walk
    /// to is the value just written, at the same location, with the same dependencies and binding
    /// (nothing on the way changed), so the last reading is updated in place instead of walking the
    /// object again, and the path is never re-registered or re-bound.
    /// A value written as text stays text in the reading and the notification (compared, sent and kept
    /// without decoding it).
    func rereadPlain(_ path: WatchedPath, before old: Evaluation, written: HeldValue, encoded: [UInt8]?,
                             at location: StoredLocation, priors: inout [ChangeNotification],
                             changes: inout [ChangeNotification]) {
        path.lastReading!.held = written
        path.lastReading!.location = location
        guard !written.hasSameValue(as: old.held) else { return }
        if !path.bindings.isEmpty { bindingTable.pending.append(contentsOf: path.bindings) }
        guard !path.subscribers.isEmpty else { return }
        appendPrior(for: path, kind: .setting, old: old.held, indexes: nil, reason: .valueChanged, to: &priors)
        var notification = ChangeNotification(
            object: path.object, keyPath: path.keyPath.string, reason: .valueChanged, rev: revision, kind: .setting,
            isPrior: false, held: old.held, written, recipients: path.recipients)
        if case .decoded = written { notification.encodedNew = encoded }
        changes.append(notification)
    }

    /// Reads `path` again after a write, re-registers it if what it reads moved, and appends its
    /// notifications if its value or binding changed.
    func reread(_ path: WatchedPath, before old: Evaluation, change: CollectionChange?, at location: StoredLocation?,
                        priors: inout [ChangeNotification], changes: inout [ChangeNotification]) {
        let new: Evaluation
        // Move the cache out while updating it, so its arrays stay uniquely referenced (no copy).
        let cache = path.aggregate
        path.aggregate = nil
        if let location, cache?.update(after: change, at: location, objects: objects) == true, let cache {
            new = cache.evaluation
            path.aggregate = cache
            incrementalAggregateUpdates += 1
        } else {
            new = read(path)
            path.aggregate = makeAggregateCache(for: path, reading: new)
        }
        path.lastReading = new
        if new.dependencies != path.dependencies {
            registry.rebind(path, to: new.dependencies)
            endForbiddenSubscriptions(of: path, changes: &changes)
        }
        let rebound = new.binding != old.binding
        guard rebound || new.value != old.value else { return }
        if !path.bindings.isEmpty { bindingTable.pending.append(contentsOf: path.bindings) }
        guard !path.subscribers.isEmpty else { return }
        if let change, !rebound, let location, old.location == location, new.location == location {
            // The observed value is the array that changed: a to-many change with its indexes.
            appendPrior(for: path, kind: change.kind, old: .array(change.old), indexes: change.indexes,
                        reason: .valueChanged, to: &priors)
            changes.append(ChangeNotification(
                object: path.object, keyPath: path.keyPath.string, reason: .valueChanged, rev: revision,
                kind: change.kind, isPrior: false, old: .array(change.old), new: .array(change.new),
                indexes: change.indexes, recipients: path.recipients))
            return
        }
        let reason: ChangeReason = rebound ? .pathChanged : .valueChanged
        appendPrior(for: path, kind: .setting, old: old.value, indexes: nil, reason: reason, to: &priors)
        changes.append(ChangeNotification(
            object: path.object, keyPath: path.keyPath.string, reason: reason, rev: revision, kind: .setting,
            isPrior: false, old: old.value, new: new.value, recipients: path.recipients))
    }

    /// After `path` was re-registered (its reading now passes through other objects): ends each
    /// subscription whose connection may not read one of them, with a final `forbidden` notification
    /// carrying no value, before anything about the new reading is sent. Only on re-registration, never
    /// per event; unrestricted subscribers cost one load each.
    func endForbiddenSubscriptions(of path: WatchedPath, changes: inout [ChangeNotification]) {
        var denied: [Observation] = []
        for observation in path.subscribers where !observation.mayRead(path.dependencies) {
            denied.append(observation)
        }
        guard !denied.isEmpty else { return }
        denied.sort { $0.id < $1.id }
        for observation in denied { registry.remove(observation.id) }
        changes.append(ChangeNotification(
            object: path.object, keyPath: path.keyPath.string, reason: .forbidden, rev: revision, kind: .setting,
            isPrior: false, old: .null, new: .null, recipients: denied.map(\.recipient)))
    }

    /// Appends a prior notification for `path`'s subscribers that asked for one.
    func appendPrior(for path: WatchedPath, kind: ChangeKind, old: JSONValue, indexes: [Int]?,
                             reason: ChangeReason, to priors: inout [ChangeNotification]) {
        appendPrior(for: path, kind: kind, old: .decoded(old), indexes: indexes, reason: reason, to: &priors)
    }

    func appendPrior(for path: WatchedPath, kind: ChangeKind, old: HeldValue, indexes: [Int]?,
                     reason: ChangeReason, to priors: inout [ChangeNotification]) {
        let recipients = path.priorRecipients
        guard !recipients.isEmpty else { return }
        priors.append(ChangeNotification(
            object: path.object, keyPath: path.keyPath.string, reason: reason, rev: revision, kind: kind,
            isPrior: true, held: old, .decoded(.null), indexes: indexes, recipients: recipients))
    }

    /// What `path` reads now: its cached aggregate when it keeps one, else a fresh reading.
    func currentReading(_ path: WatchedPath) -> Evaluation {
        path.aggregate?.evaluation ?? path.lastReading ?? read(path)
    }

    func makeAggregateCache(for path: WatchedPath, reading: Evaluation) -> AggregateCache? {
        guard let op = path.keyPath.collectionOperator, AggregateCache.supports(op) else { return nil }
        return AggregateCache(keyPath: path.keyPath, object: path.object, evaluation: reading, objects: objects)
    }

    func read(_ path: WatchedPath) -> Evaluation {
        read(path.object, path.keyPath)
    }

    /// Lenient reading (never throws: a broken path reads as null).
    func read(_ object: String, _ keyPath: KeyPath) -> Evaluation {
        do {
            return try KeyPathEvaluator.evaluate(keyPath, of: object, in: objects, strict: false, classes: classes,
                                                 memo: computedMemo)
        } catch {
            return Evaluation(value: .null, dependencies: [StoredLocation(object: object, path: [])], location: nil, binding: [])
        }
    }

    func notFound(_ object: String) -> KVOError {
        KVOError(.notFound, "object '\(object)' does not exist")
    }
}
