import KVOJSON
import KVOModel

/// Builds the events one write (or one replayed history entry) to one object makes for the pattern
/// observations that match it: once per key path (or once for the id-set observations), shared by every
/// recipient, as `KVOEngine.commit` builds them for watched paths. Used live (`KVOEngine+Patterns`) and
/// for resuming (`PatternReplay`), so both deliver exactly the same events. Pure; loop thread (it reads
/// observations' permission caches).
enum PatternEvents {
    /// What the write did to the object.
    enum Write {
        case created
        case deleted
        /// A `set` or array change; `change` is the array change (with `location`, the array written).
        case changed(CollectionChange?, at: StoredLocation)
    }

    /// The observations of `matches` grouped by key path (nil: the id-set ones), in subscription order
    /// of each group's first member.
    static func grouped(_ matches: [PatternObservation]) -> [(keyPath: KeyPath?, observers: [PatternObservation])] {
        var groups: [(keyPath: KeyPath?, observers: [PatternObservation])] = []
        for observation in matches {
            if let index = groups.firstIndex(where: { $0.keyPath == observation.keyPath }) {
                groups[index].observers.append(observation)
            } else {
                groups.append((observation.keyPath, [observation]))
            }
        }
        return groups
    }

    /// Appends the events of `write` to `object` at revision `rev` for `observers` (all of `keyPath`, or
    /// all id-set ones when it is nil). `before` and `after` are the key path's readings (nil where the
    /// object did not exist, and for id-set observers). Recipients that may not read the object are left
    /// out; a reading that passed through an object a recipient may not read is `null` for it. Prior
    /// notifications go to `priors`.
    static func append(_ write: Write, object: String, keyPath: KeyPath?, before: Evaluation?, after: Evaluation?,
                       rev: UInt64, observers: [PatternObservation],
                       priors: inout [ChangeNotification], changes: inout [ChangeNotification]) {
        guard let keyPath else {
            let reason: ChangeReason
            switch write {
            case .created: reason = .created
            case .deleted: reason = .sourceDeleted
            case .changed: return
            }
            let recipients = observers.filter { $0.mayRead(object) }.map(\.recipient)
            guard !recipients.isEmpty else { return }
            var notification = ChangeNotification(
                object: object, keyPath: "", reason: reason, rev: rev, kind: .setting, isPrior: false,
                old: .null, new: .null, recipients: recipients)
            notification.namesObject = true
            notification.carriesValues = false
            changes.append(notification)
            return
        }
        // Each observer sees each side's reading only if it may read everything that reading passed
        // through; a side it may not read reads as `null` for it (as a broken path does), so nothing of an
        // unreadable object (value, type, existence) reaches it, and its view stays consistent as the
        // path moves into and out of unreadable objects. Observers are grouped by what they see.
        var full: [PatternObservation] = []
        var masked: [(seesBefore: Bool, seesAfter: Bool, observers: [PatternObservation])] = []
        for observer in observers where observer.mayRead(object) {
            let seesBefore = before.map { observer.mayRead($0.dependencies) } ?? true
            let seesAfter = after.map { observer.mayRead($0.dependencies) } ?? true
            if seesBefore && seesAfter {
                full.append(observer)
            } else if let index = masked.firstIndex(where: { $0.seesBefore == seesBefore && $0.seesAfter == seesAfter }) {
                masked[index].observers.append(observer)
            } else {
                masked.append((seesBefore, seesAfter, [observer]))
            }
        }
        if !full.isEmpty {
            appendChange(write, object: object, keyPath: keyPath, before: before, after: after, rev: rev,
                         observers: full, priors: &priors, changes: &changes)
        }
        for group in masked {
            appendChange(write, object: object, keyPath: keyPath,
                         before: group.seesBefore ? before : before.map(PatternEvents.unreadable),
                         after: group.seesAfter ? after : after.map(PatternEvents.unreadable), rev: rev,
                         observers: group.observers, priors: &priors, changes: &changes)
        }
    }

    /// A reading as an observer who may not read what it passed through sees it: `null`, at no
    /// location, bound to no object it could not name itself.
    private static func unreadable(_ reading: Evaluation) -> Evaluation {
        Evaluation(value: .null, dependencies: [], location: nil, binding: [])
    }

    /// Appends the event (and prior) of `write` for `observers`, who may read both readings as given.
    private static func appendChange(_ write: Write, object: String, keyPath: KeyPath, before: Evaluation?,
                                     after: Evaluation?, rev: UInt64, observers: [PatternObservation],
                                     priors: inout [ChangeNotification], changes: inout [ChangeNotification]) {
        let oldValue = before?.value ?? .null
        let newValue = after?.value ?? .null
        var kind = ChangeKind.setting
        var indexes: [Int]?
        var old = oldValue
        var new = newValue
        let reason: ChangeReason
        switch write {
        case .created:
            // A new object yields a change only when the key path has a value in it.
            guard newValue != .null else { return }
            reason = .created
        case .deleted:
            reason = .sourceDeleted
            new = .null
        case let .changed(change, location):
            let rebound = before?.binding != after?.binding
            guard rebound || oldValue != newValue else { return }
            if let change, !rebound, before?.location == location, after?.location == location {
                // The observed value is the array that changed: a to-many change with its indexes.
                kind = change.kind
                indexes = change.indexes
                old = .array(change.old)
                new = .array(change.new)
                reason = .valueChanged
            } else {
                reason = rebound ? .pathChanged : .valueChanged
            }
        }
        let recipients = observers.map(\.recipient)
        let priorRecipients = observers.filter { $0.options.contains(.prior) }.map(\.recipient)
        if !priorRecipients.isEmpty {
            var prior = ChangeNotification(
                object: object, keyPath: keyPath.string, reason: reason, rev: rev, kind: kind, isPrior: true,
                old: old, new: .null, indexes: indexes, recipients: priorRecipients)
            prior.namesObject = true
            priors.append(prior)
        }
        var notification = ChangeNotification(
            object: object, keyPath: keyPath.string, reason: reason, rev: rev, kind: kind, isPrior: false,
            old: old, new: new, indexes: indexes, recipients: recipients)
        notification.namesObject = true
        changes.append(notification)
    }
}
