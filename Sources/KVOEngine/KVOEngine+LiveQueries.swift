import KVOJSON
import KVOModel

/// What a live query was before a write to one object: taken by `patternWatch(for:writing:)`.
struct LiveQueryWatch {
    let observation: PatternObservation
    /// Whether the object was in the query's set; nil when the write cannot change that (it writes
    /// inside the object at a key the filter does not read), so it was not evaluated.
    let wasMember: Bool?
    /// The observed key path's reading before the write, when the object may have been in the set.
    let before: Evaluation?
}

/// The readings of one object's key paths in one state (before a write, or after it), so that the index
/// lookups, the filters and the observed key paths of a write's live queries read each key path once. A
/// handful of entries: a linear search. Lives for one `patternWatch` or one `notifyLiveQueries`; loop thread.
final class ObjectReadings {
    let object: String
    /// The key paths read (as text) and their readings, at the same positions.
    private var keyPaths: [String] = []
    private var readings: [Evaluation] = []

    init(of object: String) { self.object = object }

    func reading(_ keyPath: KeyPath, in engine: KVOEngine) -> Evaluation {
        var index = 0
        while index < keyPaths.count {
            if keyPaths[index] == keyPath.string { return readings[index] }
            index += 1
        }
        let reading = engine.read(object, keyPath)
        keyPaths.append(keyPath.string)
        readings.append(reading)
        return reading
    }
}

/// Live queries (docs/protocol.md, "Live queries"): pattern observations with a `where` filter. Nothing
/// about the set is kept between writes: a write to object X evaluates, before and after it, the filters
/// of the queries that can concern X (the ones in the pattern trie whose pattern matches X, and the ones
/// whose equality bucket X's value falls in, before or after), and only when the write can change what
/// the filter reads. What they read is each observer's reading (a value read through an object the
/// observer may not read is `null` to it), so a query never admits an object on a value its user may
/// not see. Loop thread only, as the engine.
extension KVOEngine {
    /// Filters evaluated so far (what `kvod-bench live-queries` and the tests count).
    public var liveQueryEvaluations: Int { liveQueryEvaluationCount }

    /// The live queries in the equality buckets that the object's current values fall in.
    func indexedQueries(_ readings: ObjectReadings) -> [PatternObservation] {
        var result: [PatternObservation] = []
        for keyPath in registry.patterns.equalityKeyPaths {
            guard case let .string(text) = readings.reading(keyPath, in: self).value else { continue }
            result += registry.patterns.candidates(at: keyPath, equalTo: text, object: readings.object)
        }
        return result
    }

    /// Whether a write at `path` (nil: anywhere) can change an object's value at a key path live queries
    /// are filed under (`PatternIndex.equalityKeyPaths`).
    func mayMoveBetweenBuckets(writing path: [String]?) -> Bool {
        let keyPaths = registry.patterns.equalityKeyPaths
        guard !keyPaths.isEmpty else { return false }
        guard let first = path?.first, classes.isEmpty else { return true }
        return keyPaths.contains { $0.components.first == first }
    }

    /// Whether `object` (which exists) is in `observation`'s set now: the observer may read it, and the
    /// filter (if any) holds on the observer's readings.
    func isInSet(_ object: String, of observation: PatternObservation, readings: ObjectReadings? = nil) -> Bool {
        guard observation.mayRead(object) else { return false }
        guard let filter = observation.filter else { return true }
        liveQueryEvaluationCount += 1
        let readings = readings ?? ObjectReadings(of: object)
        return filter.holds { keyPath in
            let reading = readings.reading(keyPath, in: self)
            return observation.mayRead(reading.dependencies) ? reading.value : .null
        }
    }

    func liveQueryWatch(_ observation: PatternObservation, readings: ObjectReadings, exists: Bool,
                        writing path: [String]?) -> LiveQueryWatch {
        guard exists else { return LiveQueryWatch(observation: observation, wasMember: false, before: nil) }
        let before = observation.keyPath.map { readings.reading($0, in: self) }
        guard canChangeMembership(observation, writing: path) else {
            return LiveQueryWatch(observation: observation, wasMember: nil, before: before)
        }
        let member = isInSet(readings.object, of: observation, readings: readings)
        return LiveQueryWatch(observation: observation, wasMember: member, before: member ? before : nil)
    }

    /// Whether a write at `path` in an object can change whether it is in `observation`'s set.
    private func canChangeMembership(_ observation: PatternObservation, writing path: [String]?) -> Bool {
        guard let path, let filter = observation.filter else { return true }
        // A class's computed property may read any key of the object.
        return !classes.isEmpty || filter.reads(writtenPath: path)
    }

    /// After a write to `object`: `entered`, `left` or the ordinary change event of each live query of
    /// `watches`, and `entered` for queries whose equality bucket the object moved into.
    func notifyLiveQueries(_ watches: [LiveQueryWatch], of write: PatternEvents.Write, to object: String,
                           exists: Bool, priors: inout [ChangeNotification], changes: inout [ChangeNotification]) {
        let readings = ObjectReadings(of: object)
        var all = watches
        if exists {
            for observation in indexedQueries(readings) where !watches.contains(where: { $0.observation === observation }) {
                all.append(LiveQueryWatch(observation: observation, wasMember: false, before: nil))
            }
        }
        if all.count > 1 { all.sort { $0.observation.id < $1.observation.id } }
        for watch in all {
            let observation = watch.observation
            guard let wasMember = watch.wasMember else {
                // The write cannot move the object in or out: a change at the key path if it is in.
                guard let keyPath = observation.keyPath, let before = watch.before else { continue }
                let after = readings.reading(keyPath, in: self)
                guard after.value != before.value || after.binding != before.binding,
                      isInSet(object, of: observation, readings: readings) else { continue }
                PatternEvents.append(write, object: object, keyPath: keyPath, before: before, after: after,
                                     rev: revision, observers: [observation], priors: &priors, changes: &changes)
                continue
            }
            let isMember = exists && isInSet(object, of: observation, readings: readings)
            switch (wasMember, isMember) {
            case (false, false):
                continue
            case (true, true):
                guard let keyPath = observation.keyPath else { continue }
                PatternEvents.append(write, object: object, keyPath: keyPath, before: watch.before,
                                     after: readings.reading(keyPath, in: self), rev: revision, observers: [observation],
                                     priors: &priors, changes: &changes)
            case (false, true):
                let value = observation.keyPath.map { visibleValue(readings.reading($0, in: self), to: observation) }
                changes.append(KVOEngine.membershipEvent(.entered, object: object, observation: observation, old: .null,
                                                         new: value ?? .null, rev: revision))
            case (true, false):
                let value = watch.before.map { visibleValue($0, to: observation) }
                changes.append(KVOEngine.membershipEvent(.left, object: object, observation: observation, old: value ?? .null,
                                                         new: .null, rev: revision))
            }
        }
    }

    /// A reading's value as `observation`'s user sees it: `null` when it passed through an object the
    /// user may not read.
    private func visibleValue(_ reading: Evaluation, to observation: PatternObservation) -> JSONValue {
        observation.mayRead(reading.dependencies) ? reading.value : .null
    }

    /// An `entered` or `left` event for `observation` at revision `rev` (live, and in `PatternReplay`).
    static func membershipEvent(_ reason: ChangeReason, object: String, observation: PatternObservation,
                                old: JSONValue, new: JSONValue, rev: UInt64) -> ChangeNotification {
        var notification = ChangeNotification(
            object: object, keyPath: observation.keyPath?.string ?? "", reason: reason, rev: rev, kind: .setting,
            isPrior: false, old: old, new: new, recipients: [observation.recipient])
        notification.namesObject = true
        notification.carriesValues = observation.keyPath != nil
        return notification
    }
}
