/// Every observation on the server, indexed three ways: by object and key path (a trie per
/// object, for fan-out), by subscription id (for `unobserve`) and by connection (for disconnect).
///
/// Owned by `KVOEngine`; loop thread only.
final class ObservationRegistry {
    private var roots: [String: KeyPathNode] = [:]
    private var byID: [SubscriptionID: Observation] = [:]
    private var byConnection: [ConnectionID: Set<SubscriptionID>] = [:]
    private var lastID: SubscriptionID = 0

    /// Number of live observations.
    var count: Int { byID.count }

    /// Registers an observation and returns it with a fresh id.
    func add(connection: ConnectionID, object: String, keyPath: KeyPath, options: ObservationOptions) -> Observation {
        lastID += 1
        let root = roots[object] ?? {
            let node = KeyPathNode(components: [], parent: nil)
            roots[object] = node
            return node
        }()
        var node = root
        for key in keyPath.components { node = node.child(key) }
        let observation = Observation(id: lastID, connection: connection, object: object, keyPath: keyPath,
                                      options: options, node: node)
        node.observations[observation.id] = observation
        byID[observation.id] = observation
        byConnection[connection, default: []].insert(observation.id)
        return observation
    }

    func observation(_ id: SubscriptionID) -> Observation? { byID[id] }

    /// Removes one observation, pruning trie nodes left empty. Returns false if it was not there.
    @discardableResult
    func remove(_ id: SubscriptionID) -> Bool {
        guard let observation = byID.removeValue(forKey: id) else { return false }
        byConnection[observation.connection]?.remove(id)
        if byConnection[observation.connection]?.isEmpty == true {
            byConnection[observation.connection] = nil
        }
        var node: KeyPathNode? = observation.node
        node?.observations[id] = nil
        while let current = node, current.isEmpty {
            if let parent = current.parent {
                parent.children[current.components.last!] = nil
                node = parent
            } else {
                roots[observation.object] = nil
                node = nil
            }
        }
        return true
    }

    /// Removes every observation of `connection`; returns how many.
    @discardableResult
    func removeAll(of connection: ConnectionID) -> Int {
        guard let ids = byConnection[connection] else { return 0 }
        for id in ids { remove(id) }
        return ids.count
    }

    /// Removes every observation of `object` at once.
    func removeAll(on object: String) {
        guard let root = roots.removeValue(forKey: object) else { return }
        root.forEachObservedNode { node in
            for (id, observation) in node.observations {
                byID[id] = nil
                byConnection[observation.connection]?.remove(id)
                if byConnection[observation.connection]?.isEmpty == true {
                    byConnection[observation.connection] = nil
                }
            }
        }
    }

    /// Observations of `object`, in subscription order.
    func observations(on object: String) -> [Observation] {
        var result: [Observation] = []
        roots[object]?.forEachObservedNode { result.append(contentsOf: $0.observations.values) }
        return result.sorted { $0.id < $1.id }
    }

    /// Every observed node of `object` (for deletion).
    func observedNodes(on object: String) -> [KeyPathNode] {
        var result: [KeyPathNode] = []
        roots[object]?.forEachObservedNode { result.append($0) }
        return result
    }

    /// The observed nodes a change at `components` of `object` can affect: the nodes on the path
    /// (observers of the path and of its prefixes) and every node below it (observers of longer
    /// paths). Cost: the path's length plus the size of the affected subtree, whatever else is
    /// observed.
    func affectedNodes(on object: String, at components: [String]) -> [KeyPathNode] {
        guard var node = roots[object] else { return [] }
        var result: [KeyPathNode] = []
        for key in components {
            guard let next = node.children[key] else { return result }
            node = next
            if !node.observations.isEmpty { result.append(node) }
        }
        for child in node.children.values {
            child.forEachObservedNode { result.append($0) }
        }
        return result
    }
}
