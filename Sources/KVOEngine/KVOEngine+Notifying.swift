import KVOJSON
import KVOModel

/// Every write's commit: the watched paths it may affect read before and after, and the notifications of those that changed (the per-write hot path).
/// Loop thread only, like the rest of `KVOEngine`.
extension KVOEngine {
    /// Applies one write at `location` and notifies every watched path whose reading it changed.
    /// `encodedWrite`: for a `set`, its value's `JSONWriter` bytes when already known.
    func commit(at location: StoredLocation, encodedWrite: [UInt8]? = nil, notifications: inout [ChangeNotification],
                        _ write: () throws(KVOError) -> RecordedChange) throws(KVOError) -> UInt64 {
        try checkRevisionRoom()
        if let batch { return try commitInBatch(batch, at: location, write) }
        let candidates = registry.watchers(affectedBy: location)
        let before = candidates.map(currentReading)
        // Pattern observations matching the object: one check when there are none.
        let patternWatch = registry.patterns.isEmpty ? nil : patternWatch(for: location.object, writing: location.path)
        stampNextWrite()
        let recorded = try write()
        computedMemo.invalidate()
        revision += 1
        var change: CollectionChange?
        var written: JSONValue?
        var created = false
        switch recorded {
        case let .array(array):
            change = CollectionChange(kind: array.kind, indexes: array.indexes, old: array.old, new: array.new)
        case let .set(_, _, new):
            written = new
        case .created:
            created = true
        case .deleted, .expired:
            break
        }
        record(location.object, recorded)
        if !expiries.isEmpty { refreshExpiry(of: location.object) }
        guard !candidates.isEmpty || patternWatch != nil else { return revision }
        notify(candidates, before: before, patternWatch: patternWatch, at: location, written: written, writtenText: nil,
               change: change, created: created, encodedWrite: encodedWrite, notifications: &notifications)
        return revision
    }

    /// `commit` of a `set` of a top-level key whose new value is held as text (`writeText`): `write` applies it
    /// and returns the value it replaced; history keeps the text (`HistoryEntry(setAt:)`). Apart from the
    /// decoded `commit` so that the common write does not carry the text case through its closure and
    /// result (copies and outlined destroys of a wrapping enum, measured: docs/performance.md, issue 28).
    func commitText(at location: StoredLocation, text: CanonicalText, notifications: inout [ChangeNotification],
                    _ write: () throws(KVOError) -> HeldValue?) throws(KVOError) -> UInt64 {
        try checkRevisionRoom()
        if let batch { return try commitTextInBatch(batch, at: location, text: text, write) }
        let candidates = registry.watchers(affectedBy: location)
        let before = candidates.map(currentReading)
        let patternWatch = registry.patterns.isEmpty ? nil : patternWatch(for: location.object, writing: location.path)
        stampNextWrite()
        let old = try write()
        computedMemo.invalidate()
        revision += 1
        record(location.object, HistoryEntry(rev: revision, object: location.object, setAt: location.path, old: old,
                                             new: text, changeSize: takeMeasuredChangeSize()))
        if !expiries.isEmpty { refreshExpiry(of: location.object) }
        guard !candidates.isEmpty || patternWatch != nil else { return revision }
        notify(candidates, before: before, patternWatch: patternWatch, at: location, written: .null, writtenText: text,
               change: nil, created: false, encodedWrite: nil, notifications: &notifications)
        return revision
    }

    /// The notifications of a committed write: each candidate re-read (`rereadPlain` for a plain reading
    /// of the key written), then pattern observations.
    private func notify(_ candidates: [WatchedPath], before: [Evaluation], patternWatch: PatternWatch?,
                        at location: StoredLocation, written: JSONValue?, writtenText: CanonicalText?,
                        change: CollectionChange?, created: Bool,
                        encodedWrite: [UInt8]?, notifications: inout [ChangeNotification]) {
        // Ordinary notifications go straight to the caller's array (no array of their own per write);
        // prior ones, rarely asked for, are collected apart and put before them.
        let start = notifications.count
        var priors: [ChangeNotification] = []
        let pendingStart = bindingTable.pending.count
        for (path, old) in zip(candidates, before) {
            if let written, path.readsOnlyStoredValue(at: location) {
                rereadPlain(path, before: old, written: written, text: writtenText, encoded: encodedWrite, at: location,
                            priors: &priors, changes: &notifications)
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
    }

    /// `reread` for the common observation (`v`, `address.city` of its own object) after a `set` of
    /// exactly the key it reads (`WatchedPath.readsOnlyStoredValue(at:)`): what `read(path)` would walk
    /// to is the value just written, at the same location, with the same dependencies and binding
    /// (nothing on the way changed), so the last reading is updated in place instead of walking the
    /// object again, and the path is never re-registered or re-bound.
    /// A value written as text stays text in the reading and the notification (compared, sent and kept
    /// without decoding it).
    func rereadPlain(_ path: WatchedPath, before old: Evaluation, written: JSONValue, text: CanonicalText?,
                     encoded: [UInt8]?, at location: StoredLocation, priors: inout [ChangeNotification],
                     changes: inout [ChangeNotification]) {
        path.lastReading!.decoded = written
        path.lastReading!.text = text
        path.lastReading!.location = location
        let unchanged: Bool
        switch (text, old.text) {
        case (nil, nil): unchanged = written == old.decoded
        case let (new?, before?): unchanged = new.hasSameValue(as: before)
        case let (new?, nil): unchanged = new.hasSameValue(as: old.decoded)
        case let (nil, before?): unchanged = before.hasSameValue(as: written)
        }
        guard !unchanged else { return }
        if !path.bindings.isEmpty { bindingTable.pending.append(contentsOf: path.bindings) }
        guard !path.subscribers.isEmpty else { return }
        appendPrior(for: path, kind: .setting, old: old.decoded, text: old.text, indexes: nil, reason: .valueChanged,
                    to: &priors)
        // Built in place in the array (a `var` changed after `init` costs a copy of the whole notification).
        changes.append(ChangeNotification(
            object: path.object, keyPath: path.keyPath.string, reason: .valueChanged, rev: revision, kind: .setting,
            isPrior: false, old: old.decoded, encodedOld: old.text?.bytes, new: written, newText: text?.bytes,
            encodedNew: encoded, recipients: path.recipients))
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
    func appendPrior(for path: WatchedPath, kind: ChangeKind, old: JSONValue, text: CanonicalText? = nil,
                     indexes: [Int]?, reason: ChangeReason, to priors: inout [ChangeNotification]) {
        let recipients = path.priorRecipients
        guard !recipients.isEmpty else { return }
        priors.append(ChangeNotification(
            object: path.object, keyPath: path.keyPath.string, reason: reason, rev: revision, kind: kind,
            isPrior: true, old: old, encodedOld: text?.bytes, new: .null, newText: nil, encodedNew: nil,
            indexes: indexes, recipients: recipients))
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
