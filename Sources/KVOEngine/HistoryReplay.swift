import KVOJSON
import KVOModel

/// Replays history for one observation resuming from a revision (`observe` with `sinceRev`).
///
/// The store is rolled back to the revision without copying it: an overlay holds the objects written
/// since, each brought back by undoing those writes' deltas, newest first. Then each write is redone
/// on the overlay in order, and the observation's key path is read again whenever the write touched
/// an object the last reading depended on; changes become notifications carrying the write's
/// original revision, exactly as live delivery made them (priors, kinds 2-4, `pathChanged`,
/// `sourceDeleted`). Loop thread (it reads the engine's store).
struct HistoryReplay {
    var notifications: [ChangeNotification] = []
    /// The observed object was deleted in the replayed span: the observation has ended.
    var endedBySourceDeletion = false

    /// Replays `entries` (oldest first, consecutive revisions after the resume point; a batch's entries share one, and replay as one step). With
    /// `readable` (a restricted connection's permission check), nil when any reading of the span
    /// passed through an object the connection may not read: nothing of it may be sent.
    init?(_ entries: ArraySlice<HistoryEntry>, object: String, keyPath: KeyPath, options: ObservationOptions,
          recipient: Recipient, objects: ObjectTable, classes: ClassCatalog? = nil,
          readable: ((Evaluation) -> Bool)? = nil) {
        // Each change decoded once (an entry restored from disk decodes its text on every `change`).
        let changes = entries.map(\.change)
        var overlay = HistoryReplay.valuesBefore(entries, changes: changes, objects: objects)
        var reading = HistoryReplay.read(keyPath, of: object, objects, overlay, classes)
        if let readable, !readable(reading) { return nil }
        // One step per revision: a batch's entries share theirs, and its observers saw it as one change.
        let list = Array(entries)
        var next = 0
        while next < list.count {
            let rev = list[next].rev
            let first = next
            var touchesReading = false
            var objectExpired = false
            while next < list.count, list[next].rev == rev {
                let written = list[next].object
                if written == object { objectExpired = list[next].isExpiry }
                var value = overlay[written]!
                changes[next].apply(to: &value, forward: true)
                overlay.updateValue(value, forKey: written)
                if written == object || reading.dependencies.contains(where: { $0.object == written }) { touchesReading = true }
                next += 1
            }
            guard touchesReading else { continue }
            if case .some(.none) = overlay[object] {
                // The observed object is gone after this revision: the observation ends.
                // An expiry's ending says so, as it did live (`KVOEngine.expire`).
                let start = notifications.count
                if options.contains(.prior) {
                    notifications.append(ChangeNotification(
                        object: object, keyPath: keyPath.string, reason: .sourceDeleted, rev: rev, kind: .setting,
                        isPrior: true, old: reading.value, new: .null, recipients: [recipient]))
                }
                notifications.append(ChangeNotification(
                    object: object, keyPath: keyPath.string, reason: .sourceDeleted, rev: rev, kind: .setting,
                    isPrior: false, old: reading.value, new: .null, recipients: [recipient]))
                if objectExpired { PatternReplay.markExpired(&notifications, from: start) }
                endedBySourceDeletion = true
                return
            }
            let new = HistoryReplay.read(keyPath, of: object, objects, overlay, classes)
            if let readable, !readable(new) { return nil }
            defer { reading = new }
            let rebound = new.binding != reading.binding
            guard rebound || new.value != reading.value else { continue }
            // The array the reading reads, changed by its object's only write of the revision, keeps its indexes
            // (as live delivery kept them: `BatchWrite.onlyArrayChange`).
            if !rebound, let array = reading.location, new.location == array,
               let only = HistoryReplay.onlyWrite(to: array.object, in: list[first..<next]),
               case let .array(change) = changes[only], StoredLocation(object: array.object, path: change.path) == array {
                append(kind: change.kind, indexes: change.indexes, old: .array(change.old), new: .array(change.new),
                       reason: .valueChanged, rev: rev, object: object, keyPath: keyPath, options: options,
                       recipient: recipient)
                continue
            }
            append(kind: .setting, indexes: nil, old: reading.value, new: new.value,
                   reason: rebound ? .pathChanged : .valueChanged, rev: rev, object: object, keyPath: keyPath,
                   options: options, recipient: recipient)
        }
    }

    private mutating func append(kind: ChangeKind, indexes: [Int]?, old: JSONValue, new: JSONValue, reason: ChangeReason,
                                 rev: UInt64, object: String, keyPath: KeyPath, options: ObservationOptions,
                                 recipient: Recipient) {
        if options.contains(.prior) {
            notifications.append(ChangeNotification(
                object: object, keyPath: keyPath.string, reason: reason, rev: rev, kind: kind, isPrior: true,
                old: old, new: .null, indexes: indexes, recipients: [recipient]))
        }
        notifications.append(ChangeNotification(
            object: object, keyPath: keyPath.string, reason: reason, rev: rev, kind: kind, isPrior: false,
            old: old, new: new, indexes: indexes, recipients: [recipient]))
    }

    /// The index of the only entry of `entries` that writes `object`, nil when none or several do.
    static func onlyWrite(to object: String, in entries: ArraySlice<HistoryEntry>) -> Int? {
        var found: Int?
        for index in entries.indices where entries[index].object == object {
            guard found == nil else { return nil }
            found = index
        }
        return found
    }

    /// The store as it was before `entries` (oldest first), as an overlay on `objects`: every object the
    /// entries wrote, with its value before the first of them (nil: it did not exist). Objects not in the
    /// overlay are as in `objects`. Built by undoing the entries newest first; no copy of the store.
    /// `changes` holds each entry's `change`, decoded once by the caller, in the same order.
    static func valuesBefore(_ entries: ArraySlice<HistoryEntry>, changes: [RecordedChange],
                             objects: ObjectTable) -> [String: JSONValue?] {
        var overlay: [String: JSONValue?] = [:]
        for (entry, change) in zip(entries, changes).reversed() {
            let id = entry.object
            var value: JSONValue? = overlay.index(forKey: id) != nil ? overlay[id]! : objects[id]
            change.apply(to: &value, forward: false)
            overlay.updateValue(value, forKey: id)
        }
        return overlay
    }

    /// `keyPath` read on `object` in the store rolled back by `overlay` (`valuesBefore`); a broken path reads
    /// as null, as observers see it.
    static func read(_ keyPath: KeyPath, of object: String, _ objects: ObjectTable,
                             _ overlay: [String: JSONValue?], _ classes: ClassCatalog?) -> Evaluation {
        (try? KeyPathEvaluator.evaluate(keyPath, of: object, in: objects, overlay: overlay, strict: false,
                                        classes: classes))
            ?? Evaluation(value: .null, dependencies: [StoredLocation(object: object, path: [])], location: nil, binding: [])
    }
}
