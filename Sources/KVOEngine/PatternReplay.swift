import KVOJSON
import KVOModel

/// Replays history for a pattern observation resuming from a revision (`observe` with `pattern` and
/// `sinceRev`): every entry whose object matches the pattern, in order (a batch's entries, which share a revision,
/// as one step), makes exactly the events live delivery made (`PatternEvents`), with the entry's original revision; entries of other objects make
/// none. For a key path, the store is rolled back on an overlay as `HistoryReplay` does (no copy of the
/// store), and the key path is read on it before and after each matching entry. Events for objects the
/// observer may not read (or readings passing through such objects) are left out, as they are live.
/// Loop thread (it reads the engine's store).
struct PatternReplay {
    var notifications: [ChangeNotification] = []

    init(_ entries: ArraySlice<HistoryEntry>, observation: PatternObservation,
         objects: ObjectTable, classes: ClassCatalog?) {
        let pattern = observation.pattern
        let list = Array(entries)
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
                    // An object's only write in the revision keeps its location (and an array change its indexes).
                    let root = StoredLocation(object: object.object, path: [])
                    guard object.writes == 1 else { write = .changed(nil, at: root); break }
                    switch changes[object.last] {
                    case let .set(path, _, _): write = .changed(nil, at: StoredLocation(object: object.object, path: path))
                    case let .array(change):
                        write = .changed(CollectionChange(kind: change.kind, indexes: change.indexes, old: change.old,
                                                          new: change.new),
                                         at: StoredLocation(object: object.object, path: change.path))
                    case .created, .deleted, .expired: write = .changed(nil, at: root)
                    }
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

    /// Marks the endings among `notifications[start...]` as `expired`, as `KVOEngine.expire` marked them live.
    static func markExpired(_ notifications: inout [ChangeNotification], from start: Int) {
        for index in start..<notifications.count
        where notifications[index].reason == .sourceDeleted || notifications[index].reason == .left {
            notifications[index].expired = true
        }
    }
}
