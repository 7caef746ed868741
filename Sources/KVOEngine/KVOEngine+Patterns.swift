import KVOJSON
import KVOModel

/// Pattern observations (docs/protocol.md, "Observing object sets (patterns)"): the creations and
/// deletions of the objects whose ids match a pattern, or a key path on every such object, present and
/// future. They live in `ObservationRegistry.patterns` (a trie over their literal prefixes); a write to
/// object X meets only those whose prefix X starts with, and costs one `isEmpty` check when there are
/// none. Loop thread only, as the engine.
extension KVOEngine {
    /// The pattern observations a write to `object` concerns, grouped by key path, with each key path's
    /// reading before the write (nil for the id-set group, and when the object does not exist), and the
    /// live queries it may concern, each with what it was before the write.
    struct PatternWatch {
        var groups: [(keyPath: KeyPath?, observers: [PatternObservation])]
        var before: [Evaluation?]
        var queries: [LiveQueryWatch] = []
    }

    /// Number of pattern observations (they are also counted in `observationCount`).
    public var patternObservationCount: Int { registry.patterns.count }

    /// Starts observing the objects whose ids match `pattern` for `connection`: their creations and
    /// deletions when `keyPath` is nil (an id set), else `keyPath` on each of them, present and future.
    /// Counts against `maximumObservationsPerConnection`. With `.initial`, appends one `initial`
    /// notification listing the matching ids (sorted) for an id set, or one per matching object with
    /// its value for a key path. With `sinceRev`, resumes instead: appends every event of the span
    /// after that revision, or, past the history kept, a `resync` (the ids, or one per object).
    /// Objects the connection may not read are left out of every event.
    ///
    /// With `filter` it is a live query: only the matching objects on which the filter holds are in the
    /// set, `initial` lists those, objects entering and leaving the set give `entered` and `left`, and
    /// `sinceRev` replays them from history like any pattern observation (`PatternReplay`, which evaluates
    /// the filter on the rolled-back store), or resyncs past it.
    public func observe(pattern: ObjectIDPattern, keyPath: KeyPath?, filter: LiveQuery? = nil,
                        options requested: ObservationOptions, connection: ConnectionID, sinceRev: UInt64? = nil,
                        access: ConnectionAccess? = nil,
                        notifications: inout [ChangeNotification]) throws(KVOError) -> SubscriptionID {
        try checkObservationRoom(for: connection)
        // An id set's only value is its initial (or resync) list of ids, which it always carries.
        let options = keyPath == nil ? requested.union(.new).subtracting([.old, .prior]) : requested
        let observation = PatternObservation(id: registry.nextSubscriptionID(), connection: connection,
                                             options: options, access: access, pattern: pattern, keyPath: keyPath,
                                             filter: filter)
        registry.patterns.add(observation)
        if let sinceRev {
            resume(observation, sinceRev: sinceRev, notifications: &notifications)
        } else if options.contains(.initial) {
            appendCurrent(of: observation, reason: .initial, to: &notifications)
        }
        return observation.id
    }

    /// Appends the current state as `initial` or `resync` events: the sorted ids for an id set, one
    /// event per object (in id order) for a key path.
    private func appendCurrent(of observation: PatternObservation, reason: ChangeReason,
                               to notifications: inout [ChangeNotification]) {
        let ids = matchingObjects(observation.pattern).filter { isInSet($0, of: observation) }
        guard let keyPath = observation.keyPath else {
            var notification = ChangeNotification(
                object: "", keyPath: "", reason: reason, rev: revision, kind: .setting, isPrior: false, old: .null,
                new: .array(ids.map(JSONValue.string)), recipients: [observation.recipient])
            notification.namesObject = true
            notifications.append(notification)
            return
        }
        for id in ids {
            let reading = read(id, keyPath)
            // A reading through an object the observer may not read is `null` for it, as in live events.
            let value = observation.mayRead(reading.dependencies) ? reading.value : .null
            var notification = ChangeNotification(
                object: id, keyPath: keyPath.string, reason: reason, rev: revision, kind: .setting, isPrior: false,
                old: .null, new: value, recipients: [observation.recipient])
            notification.namesObject = true
            notifications.append(notification)
        }
    }

    /// The ids of the objects `pattern` matches, in `list` order: a walk of the sorted ids from the
    /// pattern's literal prefix while ids start with it (O(log n + ids with the prefix)).
    func matchingObjects(_ pattern: ObjectIDPattern) -> [String] {
        let prefix = pattern.prefix
        var result: [String] = []
        if pattern.isExact {
            let id = String(decoding: prefix, as: UTF8.self)
            return objects.contains(id) ? [id] : []
        }
        var cursor: SortedObjectIDs.Cursor
        if prefix.isEmpty {
            cursor = objectIDs(after: nil)
        } else {
            let start = String(decoding: prefix, as: UTF8.self)
            if objects.contains(start), pattern.matches(start) { result.append(start) }
            cursor = objectIDs(after: start)
        }
        while let id = cursor.next() {
            guard id.utf8.starts(with: prefix) else { break }
            if pattern.matches(id) { result.append(id) }
        }
        return result
    }

    private func resume(_ observation: PatternObservation, sinceRev: UInt64,
                        notifications: inout [ChangeNotification]) {
        guard let entries = history.entries(after: sinceRev, current: revision) else {
            appendCurrent(of: observation, reason: .resync, to: &notifications)
            return
        }
        let replay = PatternReplay(entries, observation: observation, objects: objects, classes: classes,
                                   filterStepLimit: liveQueryReplayStepLimit)
        guard !replay.exceededFilterBudget else {
            appendCurrent(of: observation, reason: .resync, to: &notifications)
            return
        }
        notifications.append(contentsOf: replay.notifications)
    }

    /// Ends pattern observation `subscription` if `connection` owns it; nil when it is no pattern
    /// observation (it may be an ordinary one).
    func unobservePattern(_ subscription: SubscriptionID, connection: ConnectionID) -> Bool? {
        guard let observation = registry.patterns.observation(subscription) else { return nil }
        guard observation.connection == connection else { return false }
        return registry.patterns.remove(subscription)
    }

    /// The pattern observations that match `object`, as `info` lists them.
    func patternObservers(of object: String) -> [ObserverInfo] {
        guard !registry.patterns.isEmpty else { return [] }
        return registry.patterns.allMatching(object).map {
            ObserverInfo(subscription: $0.id, keyPath: $0.keyPath?.string ?? "", options: $0.options,
                         connection: $0.connection, user: $0.access?.user, pattern: $0.pattern.text,
                         filter: $0.filter?.source)
        }
    }

    // MARK: - Writes

    /// Before a write to `object` at `path` inside it (nil: anywhere, as a creation, a deletion or a
    /// batch): the pattern observations that match it and their key paths' readings, and the live
    /// queries that may concern it; nil when none do. Callers check `registry.patterns.isEmpty` first
    /// (no call at all then).
    func patternWatch(for object: String, writing path: [String]? = nil) -> PatternWatch? {
        let matches = registry.patterns.matching(object)
        let exists = objects.contains(object)
        guard registry.patterns.liveQueryCount > 0 else {
            // No live query anywhere: the plain path, with nothing allocated for queries.
            guard !matches.isEmpty else { return nil }
            return plainWatch(matches, of: object, exists: exists)
        }
        var plain: [PatternObservation] = []
        var queries: [PatternObservation] = []
        for observation in matches {
            if observation.filter == nil { plain.append(observation) } else { queries.append(observation) }
        }
        let readings = ObjectReadings(of: object)
        if exists { queries += indexedQueries(readings) }
        // The write may move the object into an equality bucket: then its queries are found after it.
        guard !plain.isEmpty || !queries.isEmpty || mayMoveBetweenBuckets(writing: path) else { return nil }
        var watch = plainWatch(plain, of: object, exists: exists)
        watch.queries = queries.map { liveQueryWatch($0, readings: readings, exists: exists, writing: path) }
        return watch
    }

    /// The watch of the pattern observations without a filter: grouped by key path, each key path read.
    private func plainWatch(_ observations: [PatternObservation], of object: String, exists: Bool) -> PatternWatch {
        let groups = PatternEvents.grouped(observations)
        return PatternWatch(groups: groups, before: groups.map { group in
            guard exists, let keyPath = group.keyPath else { return nil }
            return read(object, keyPath)
        })
    }

    /// After the write: the events of `watch`'s pattern observations (priors to `priors`).
    func notifyPatterns(_ watch: PatternWatch, of write: PatternEvents.Write, to object: String,
                        priors: inout [ChangeNotification], changes: inout [ChangeNotification]) {
        let exists = objects.contains(object)
        for (group, before) in zip(watch.groups, watch.before) {
            let after = exists ? group.keyPath.map { read(object, $0) } : nil
            PatternEvents.append(write, object: object, keyPath: group.keyPath, before: before, after: after,
                                 rev: revision, observers: group.observers, priors: &priors, changes: &changes)
        }
        if !watch.queries.isEmpty || !registry.patterns.equalityKeyPaths.isEmpty {
            notifyLiveQueries(watch.queries, of: write, to: object, exists: exists, priors: &priors, changes: &changes)
        }
    }
}
