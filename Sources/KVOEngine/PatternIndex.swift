import KVOModel

/// Every pattern observation, indexed by its literal prefix in a trie over the prefix's UTF-8 bytes, by
/// subscription id (for `unobserve`) and by connection (for disconnect and the per-connection limit).
///
/// A write to object X walks the trie along X's bytes and meets only the pattern observations whose
/// literal prefix is a prefix of X (the root holds `*`, which matches every id); each one met is then
/// checked against the rest of its pattern (`ObjectIDPattern.matches`, linear in X). So the cost of a
/// write is X's length plus the pattern observations whose prefix it starts with, whatever the number
/// of others; with no pattern observation at all it is one check of `isEmpty`.
///
/// A live query whose `where` has an `indexTerm` (`owner == 'ada'`) is not in the trie but in an
/// equality bucket, found by the key path and the text (`candidates(at:equalTo:)`): the engine reads each
/// `equalityKeyPaths` key path of a written object once and meets only the queries of that value, so
/// ten thousand such queries on one pattern do not cost every write ten thousand pattern matches.
/// Owned by `ObservationRegistry`; loop thread only.
final class PatternIndex {
    private let root = PatternIndexNode(byte: 0, parent: nil)
    /// Live queries by their index term: key path, then the text it must equal.
    private var buckets: [KeyPath: [String: [PatternObservation]]] = [:]
    /// The key paths of `buckets`, for the engine's readings before and after a write.
    private(set) var equalityKeyPaths: [KeyPath] = []
    private var byID: [SubscriptionID: PatternObservation] = [:]
    /// Each connection's pattern observations, unordered (`PatternObservation.connectionIndex`).
    private var byConnection: [ConnectionID: [PatternObservation]] = [:]

    /// Number of pattern observations.
    var count: Int { byID.count }
    /// Number of them that are live queries (with a filter).
    private(set) var liveQueryCount = 0
    var isEmpty: Bool { byID.isEmpty }

    /// Number of pattern observations of `connection`.
    func count(of connection: ConnectionID) -> Int { byConnection[connection]?.count ?? 0 }

    func observation(_ id: SubscriptionID) -> PatternObservation? { byID[id] }

    /// The pattern observations of `connection`, in no particular order.
    func observations(of connection: ConnectionID) -> [PatternObservation] { byConnection[connection] ?? [] }

    /// Adds `observation` at the node of its literal prefix, or in its equality bucket.
    func add(_ observation: PatternObservation) {
        byID[observation.id] = observation
        if observation.filter != nil { liveQueryCount += 1 }
        observation.connectionIndex = byConnection[observation.connection]?.count ?? 0
        byConnection[observation.connection, default: []].append(observation)
        if let term = observation.filter?.indexTerm {
            if buckets[term.keyPath] == nil { equalityKeyPaths.append(term.keyPath) }
            var bucket = buckets[term.keyPath, default: [:]].removeValue(forKey: term.value) ?? []
            observation.nodeIndex = bucket.count
            bucket.append(observation)
            buckets[term.keyPath, default: [:]][term.value] = bucket
            return
        }
        var node = root
        for byte in observation.pattern.prefix { node = node.makeChild(byte) }
        observation.node = node
        observation.nodeIndex = node.observations.count
        node.observations.append(observation)
    }

    /// Every pattern observation whose pattern matches `object`, the live queries in equality buckets
    /// included (whatever the object's values), in subscription order: what `info` lists. Visits every
    /// bucket.
    func allMatching(_ object: String) -> [PatternObservation] {
        var result = matching(object)
        for values in buckets.values {
            for bucket in values.values { result += bucket.filter { $0.pattern.matches(object) } }
        }
        result.sort { $0.id < $1.id }
        return result
    }

    /// The live queries filed under `keyPath` == `value` whose pattern matches `object`.
    func candidates(at keyPath: KeyPath, equalTo value: String, object: String) -> [PatternObservation] {
        guard let bucket = buckets[keyPath]?[value] else { return [] }
        return bucket.filter { $0.pattern.matches(object) }
    }

    /// Removes pattern observation `id`; false when there is none.
    @discardableResult
    func remove(_ id: SubscriptionID) -> Bool {
        guard let observation = byID.removeValue(forKey: id) else { return false }
        if observation.filter != nil { liveQueryCount -= 1 }
        if var list = byConnection.removeValue(forKey: observation.connection) {
            list.removeIndexed(observation, position: \.connectionIndex)
            if !list.isEmpty { byConnection[observation.connection] = list }
        }
        if let term = observation.filter?.indexTerm {
            // Taken out of `buckets` first, so that its changes do not copy it.
            guard var values = buckets.removeValue(forKey: term.keyPath) else { return true }
            guard var bucket = values.removeValue(forKey: term.value) else {
                buckets[term.keyPath] = values
                return true
            }
            bucket.removeIndexed(observation, position: \.nodeIndex)
            if !bucket.isEmpty { values[term.value] = bucket }
            if values.isEmpty {
                equalityKeyPaths.removeAll { $0 == term.keyPath }
            } else {
                buckets[term.keyPath] = values
            }
            return true
        }
        guard let node = observation.node else { return true }
        observation.node = nil
        node.observations.removeIndexed(observation, position: \.nodeIndex)
        // Prune the nodes left empty, up to the root (which stays).
        var current = node
        while current.isEmpty, let parent = current.parent {
            parent.removeChild(current.byte)
            current = parent
        }
        return true
    }

    /// Removes every pattern observation of `connection`; returns how many.
    @discardableResult
    func removeAll(of connection: ConnectionID) -> Int {
        guard let list = byConnection[connection] else { return 0 }
        for observation in list { remove(observation.id) }
        return list.count
    }

    /// The pattern observations whose pattern matches `object`, in subscription order, except the live
    /// queries in equality buckets. Visits only the nodes along `object`'s bytes.
    func matching(_ object: String) -> [PatternObservation] {
        var result: [PatternObservation] = []
        var id = object
        id.withUTF8 { bytes in
            var node = root
            if !node.observations.isEmpty { collect(node, bytes, into: &result) }
            for byte in bytes {
                guard let next = node.child(byte) else { break }
                node = next
                if !node.observations.isEmpty { collect(node, bytes, into: &result) }
            }
        }
        if result.count > 1 { result.sort { $0.id < $1.id } }
        return result
    }

    private func collect(_ node: PatternIndexNode, _ id: UnsafeBufferPointer<UInt8>,
                         into result: inout [PatternObservation]) {
        for observation in node.observations where observation.pattern.matches(utf8: id) {
            result.append(observation)
        }
    }
}
