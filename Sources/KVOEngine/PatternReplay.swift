import KVOJSON
import KVOModel

/// Replays history for a pattern observation resuming from a revision (`observe` with `pattern` and
/// `sinceRev`): every entry whose object matches the pattern, in order (a batch's entries, which share a revision,
/// as one step), makes exactly the events live delivery made (`PatternEvents`), with the entry's original revision; entries of other objects make
/// none. For a key path, the store is rolled back on an overlay as `HistoryReplay` does (no copy of the
/// store), and the key path is read on it before and after each matching entry. Events for objects the
/// observer may not read (or readings passing through such objects) are left out, as they are live.
/// A live query (`where`) replays the same way: its filter is evaluated on the overlay before and after each
/// revision that touched a matching object, giving `entered`, `left` or the key path's change, as
/// `KVOEngine.notifyLiveQueries` gave them live.
/// Loop thread (it reads the engine's store).
struct PatternReplay {
    var notifications: [ChangeNotification] = []
    /// A live query's replay stopped: its filter's evaluations over the span took more than
    /// `maximumFilterSteps`. Its caller answers with `resync` instead (no events of the span).
    private(set) var exceededFilterBudget = false

    /// The steps a live query's replay may spend on its filter, all evaluations together: 100 evaluations at
    /// `LiveQuery.maximumSteps`, thousands of ordinary ones. One `observe` with `sinceRev` must not hold the
    /// loop for long, whatever its filter and however far back it reaches.
    static let maximumFilterSteps = 1_000_000

    init(_ entries: ArraySlice<HistoryEntry>, observation: PatternObservation,
         objects: ObjectTable, classes: ClassCatalog?, filterStepLimit: Int = PatternReplay.maximumFilterSteps) {
        let pattern = observation.pattern
        let list = Array(entries)
        if let filter = observation.filter {
            replayLiveQuery(entries, filter: filter, observation: observation, objects: objects, classes: classes,
                            stepLimit: filterStepLimit)
            return
        }
        // One step per revision: a batch's entries share theirs, and each object it touched makes at most
        // one event, from its state before the batch to its state after it, as live delivery made it.
        guard let keyPath = observation.keyPath else {
            var next = 0
            while next < list.count {
                let rev = list[next].rev
                // Per matching object, in first-touch order: whether it existed before the revision, and after.
                var touched: [(object: String, existed: Bool, exists: Bool, expired: Bool)] = []
                var position: [String: Int] = [:]
                while next < list.count, list[next].rev == rev {
                    let entry = list[next]
                    next += 1
                    guard pattern.matches(entry.object) else { continue }
                    // Only creations and deletions decide existence: no need to decode the change.
                    if let index = position[entry.object] {
                        if entry.isCreation { touched[index].exists = true } else if entry.isDeletion { touched[index].exists = false }
                        touched[index].expired = entry.isExpiry
                    } else {
                        position[entry.object] = touched.count
                        touched.append((entry.object, !entry.isCreation, !entry.isDeletion, entry.isExpiry))
                    }
                }
                for object in touched where object.existed != object.exists {
                    var priors: [ChangeNotification] = []
                    let start = notifications.count
                    PatternEvents.append(object.exists ? .created : .deleted, object: object.object, keyPath: nil,
                                         before: nil, after: nil, rev: rev, observers: [observation], priors: &priors,
                                         changes: &notifications)
                    if object.expired { PatternReplay.markExpired(&notifications, from: start) }
                }
            }
            return
        }
        let changes = list.map(\.change)
        var overlay = HistoryReplay.valuesBefore(entries, changes: changes, objects: objects)
        var next = 0
        while next < list.count {
            let rev = list[next].rev
            // Per matching object, in first-touch order: its reading before the revision, whether it existed,
            // and its writes in the revision.
            var touched: [(object: String, before: Evaluation?, existed: Bool, writes: Int, last: Int, expired: Bool)] = []
            var position: [String: Int] = [:]
            while next < list.count, list[next].rev == rev {
                let written = list[next].object
                var value = overlay[written]!
                if pattern.matches(written) {
                    if let index = position[written] {
                        touched[index].writes += 1
                        touched[index].last = next
                        touched[index].expired = list[next].isExpiry
                    } else {
                        let before = value != nil ? HistoryReplay.read(keyPath, of: written, objects, overlay, classes) : nil
                        position[written] = touched.count
                        touched.append((written, before, value != nil, 1, next, list[next].isExpiry))
                    }
                }
                changes[next].apply(to: &value, forward: true)
                overlay.updateValue(value, forKey: written)
                next += 1
            }
            for object in touched {
                let exists = overlay[object.object]! != nil
                let write: PatternEvents.Write
                switch (object.existed, exists) {
                case (false, true): write = .created
                case (true, false): write = .deleted
                case (false, false): continue
                case (true, true):
                    write = PatternReplay.change(of: object.object, writes: object.writes, last: changes[object.last])
                }
                let after = exists ? HistoryReplay.read(keyPath, of: object.object, objects, overlay, classes) : nil
                var priors: [ChangeNotification] = []
                var changes: [ChangeNotification] = []
                PatternEvents.append(write, object: object.object, keyPath: keyPath, before: object.before, after: after,
                                     rev: rev, observers: [observation], priors: &priors, changes: &changes)
                if object.expired, !exists {
                    PatternReplay.markExpired(&priors, from: 0)
                    PatternReplay.markExpired(&changes, from: 0)
                }
                notifications.append(contentsOf: priors)
                notifications.append(contentsOf: changes)
            }
        }
    }

    /// A live query's replay. Per revision, each matching object it touched, in first-touch order: whether it
    /// was in the set before the revision and after it (it exists, the observer may read it, and the filter
    /// holds on the observer's readings of the overlay), then `entered` (with the key path's value after),
    /// `left` (with its value before; `expired` when the object expired) or, in the set before and after, the
    /// key path's change (`PatternEvents`, with the revision's write to it as live delivery saw it).
    private mutating func replayLiveQuery(_ entries: ArraySlice<HistoryEntry>, filter: LiveQuery,
                                          observation: PatternObservation, objects: ObjectTable, classes: ClassCatalog?,
                                          stepLimit: Int) {
        let list = Array(entries)
        let changes = list.map(\.change)
        var overlay = HistoryReplay.valuesBefore(entries, changes: changes, objects: objects)
        func visible(_ reading: Evaluation) -> JSONValue {
            observation.mayRead(reading.dependencies) ? reading.value : .null
        }
        var steps = 0
        func isMember(_ object: String) -> Bool {
            guard overlay[object].map({ $0 != nil }) ?? objects.contains(object), observation.mayRead(object) else { return false }
            return filter.holds({ keyPath in visible(HistoryReplay.read(keyPath, of: object, objects, overlay, classes)) },
                                spent: &steps)
        }
        var next = 0
        while next < list.count {
            let rev = list[next].rev
            var touched: [(object: String, before: Evaluation?, wasMember: Bool, writes: Int, last: Int, expired: Bool)] = []
            var position: [String: Int] = [:]
            while next < list.count, list[next].rev == rev {
                let written = list[next].object
                if observation.pattern.matches(written) {
                    if let index = position[written] {
                        touched[index].writes += 1
                        touched[index].last = next
                        touched[index].expired = list[next].isExpiry
                    } else {
                        let wasMember = overlay[written]! != nil && isMember(written)
                        let before = wasMember ? observation.keyPath.map { HistoryReplay.read($0, of: written, objects, overlay, classes) } : nil
                        position[written] = touched.count
                        touched.append((written, before, wasMember, 1, next, list[next].isExpiry))
                    }
                }
                var value = overlay[written]!
                changes[next].apply(to: &value, forward: true)
                overlay.updateValue(value, forKey: written)
                next += 1
            }
            if steps > stepLimit {
                exceededFilterBudget = true
                notifications = []
                return
            }
            for object in touched {
                let exists = overlay[object.object]! != nil
                let member = exists && isMember(object.object)
                let after = member ? observation.keyPath.map { HistoryReplay.read($0, of: object.object, objects, overlay, classes) } : nil
                switch (object.wasMember, member) {
                case (false, false):
                    continue
                case (false, true):
                    notifications.append(KVOEngine.membershipEvent(.entered, object: object.object, observation: observation,
                                                                   old: .null, new: after.map(visible) ?? .null, rev: rev))
                case (true, false):
                    var event = KVOEngine.membershipEvent(.left, object: object.object, observation: observation,
                                                          old: object.before.map(visible) ?? .null, new: .null, rev: rev)
                    event.expired = object.expired && !exists
                    notifications.append(event)
                case (true, true):
                    guard let keyPath = observation.keyPath else { continue }
                    let write = PatternReplay.change(of: object.object, writes: object.writes, last: changes[object.last])
                    var priors: [ChangeNotification] = []
                    var events: [ChangeNotification] = []
                    PatternEvents.append(write, object: object.object, keyPath: keyPath, before: object.before, after: after,
                                         rev: rev, observers: [observation], priors: &priors, changes: &events)
                    notifications.append(contentsOf: priors)
                    notifications.append(contentsOf: events)
                }
            }
        }
    }

    /// The write a revision made to an object that existed before and after it, as live delivery saw it: an
    /// object's only write in the revision keeps its location (and an array change its indexes); several
    /// writes (a batch) are a change of the whole object.
    private static func change(of object: String, writes: Int, last: RecordedChange) -> PatternEvents.Write {
        let root = StoredLocation(object: object, path: [])
        guard writes == 1 else { return .changed(nil, at: root) }
        switch last {
        case let .set(path, _, _): return .changed(nil, at: StoredLocation(object: object, path: path))
        case let .array(change):
            return .changed(CollectionChange(kind: change.kind, indexes: change.indexes, old: change.old, new: change.new),
                            at: StoredLocation(object: object, path: change.path))
        case .created, .deleted, .expired: return .changed(nil, at: root)
        }
    }

    /// Marks the endings among `notifications[start...]` as `expired`, as `KVOEngine.expire` marked them live.
    static func markExpired(_ notifications: inout [ChangeNotification], from start: Int) {
        for index in start..<notifications.count
        where notifications[index].reason == .sourceDeleted || notifications[index].reason == .left {
            notifications[index].expired = true
        }
    }
}
