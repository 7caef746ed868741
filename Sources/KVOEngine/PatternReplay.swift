import KVOJSON
import KVOModel

/// Replays history for a pattern observation resuming from a revision (`observe` with `pattern` and
/// `sinceRev`): every entry whose object matches the pattern, in order, makes exactly the events live
/// delivery made (`PatternEvents`), with the entry's original revision; entries of other objects make
/// none. For a key path, the store is rolled back on an overlay as `HistoryReplay` does (no copy of the
/// store), and the key path is read on it before and after each matching entry. Events for objects the
/// observer may not read (or readings passing through such objects) are left out, as they are live.
/// Loop thread (it reads the engine's store).
struct PatternReplay {
    var notifications: [ChangeNotification] = []

    init(_ entries: ArraySlice<HistoryEntry>, observation: PatternObservation,
         objects: ObjectTable, classes: ClassCatalog?) {
        let pattern = observation.pattern
        guard let keyPath = observation.keyPath else {
            for entry in entries where pattern.matches(entry.object) {
                // Only creations and deletions make events without a key path: no need to decode the change.
                let write: PatternEvents.Write
                if entry.isCreation {
                    write = .created
                } else if entry.isDeletion {
                    write = .deleted
                } else {
                    continue
                }
                var priors: [ChangeNotification] = []
                PatternEvents.append(write, object: entry.object, keyPath: nil, before: nil, after: nil,
                                     rev: entry.rev, observers: [observation], priors: &priors,
                                     changes: &notifications)
            }
            return
        }
        let changes = entries.map(\.change)
        var overlay = HistoryReplay.valuesBefore(entries, changes: changes, objects: objects)
        for (entry, change) in zip(entries, changes) {
            let written = entry.object
            var value = overlay[written]!
            let matches = pattern.matches(written)
            let before = matches && value != nil
                ? HistoryReplay.read(keyPath, of: written, objects, overlay, classes) : nil
            change.apply(to: &value, forward: true)
            overlay.updateValue(value, forKey: written)
            guard matches else { continue }
            let write: PatternEvents.Write
            switch change {
            case .created: write = .created
            case .deleted: write = .deleted
            case let .set(path, _, _): write = .changed(nil, at: StoredLocation(object: written, path: path))
            case let .array(change):
                write = .changed(CollectionChange(kind: change.kind, indexes: change.indexes, old: change.old,
                                                  new: change.new),
                                 at: StoredLocation(object: written, path: change.path))
            }
            let after = value != nil ? HistoryReplay.read(keyPath, of: written, objects, overlay, classes) : nil
            var priors: [ChangeNotification] = []
            var changes: [ChangeNotification] = []
            PatternEvents.append(write, object: written, keyPath: keyPath, before: before, after: after,
                                 rev: entry.rev, observers: [observation], priors: &priors, changes: &changes)
            notifications.append(contentsOf: priors)
            notifications.append(contentsOf: changes)
        }
    }
}
