import KVOModel

/// Every observation on the server, indexed four ways: watched paths by the locations they depend on
/// (a trie per object, for fan-out), by (object, key path) (so subscribers share one reading), by
/// subscription id (for `unobserve`) and by connection (for disconnect). Pattern observations are in
/// `patterns`, numbered from the same counter and counted with the others.
///
/// Owned by `KVOEngine`; loop thread only.
final class ObservationRegistry {
    private var roots: [String: KeyPathNode] = [:]
    private var watched: [WatchedPath.Key: WatchedPath] = [:]
    private var rootedAt: [String: [ObjectIdentifier: WatchedPath]] = [:]
    private var byID: [SubscriptionID: Observation] = [:]
    /// Each connection's subscriptions, unordered; an observation knows its index here
    /// (`Observation.connectionIndex`), so removing one is O(1) without a set per connection.
    private var byConnection: [ConnectionID: [Observation]] = [:]
    private var lastID: SubscriptionID = 0
    private var lastSerial = 0
    private var queryStamp = 0
    /// Pattern observations (object sets), indexed by their literal prefix.
    let patterns = PatternIndex()

    /// Number of live subscriptions, pattern observations included.
    var count: Int { byID.count + patterns.count }

    /// Number of live subscriptions of `connection`, pattern observations included.
    func count(of connection: ConnectionID) -> Int {
        (byConnection[connection]?.count ?? 0) + patterns.count(of: connection)
    }

    /// A new subscription id (for a pattern observation; `subscribe` takes its own).
    func nextSubscriptionID() -> SubscriptionID {
        lastID += 1
        return lastID
    }

    // MARK: - Subscriptions

    /// Adds a subscription. A new (object, key path) is registered at `dependencies()`, which is
    /// only called then; a known one is shared.
    func subscribe(connection: ConnectionID, object: String, keyPath: KeyPath, options: ObservationOptions,
                   access: ConnectionAccess? = nil, dependencies: () -> [StoredLocation]) -> Observation {
        let path = watchedPath(object: object, keyPath: keyPath, dependencies: dependencies)
        lastID += 1
        let observation = Observation(id: lastID, connection: connection, options: options, access: access,
                                      watched: path)
        path.addSubscriber(observation)
        byID[observation.id] = observation
        observation.connectionIndex = byConnection[connection]?.count ?? 0
        byConnection[connection, default: []].append(observation)
        return observation
    }

    /// The watched path of (object, key path), made and registered at `dependencies()` when new.
    private func watchedPath(object: String, keyPath: KeyPath, dependencies: () -> [StoredLocation]) -> WatchedPath {
        let key = WatchedPath.Key(object: object, keyPath: keyPath.string)
        if let existing = watched[key] { return existing }
        lastSerial += 1
        let path = WatchedPath(object: object, keyPath: keyPath, serial: lastSerial)
        watched[key] = path
        rootedAt[object, default: [:]][ObjectIdentifier(path)] = path
        register(path, at: dependencies())
        return path
    }

    func observation(_ id: SubscriptionID) -> Observation? { byID[id] }

    /// The subscriptions of `connection`, in no particular order.
    func observations(of connection: ConnectionID) -> [Observation] { byConnection[connection] ?? [] }

    // MARK: - Bindings

    /// Makes `binding` listen to (object, key path), sharing the watched path with observations of it.
    /// `dependencies()` is only called for a new watched path; `isNew` tells whether it was.
    func attach(_ binding: Binding, object: String, keyPath: KeyPath,
                dependencies: () -> [StoredLocation]) -> (path: WatchedPath, isNew: Bool) {
        var isNew = false
        let path = watchedPath(object: object, keyPath: keyPath) {
            isNew = true
            return dependencies()
        }
        path.bindings.append(binding)
        return (path, isNew)
    }

    /// Stops `binding` listening to `path`; the path goes when nothing else uses it.
    func detach(_ binding: Binding, from path: WatchedPath) {
        path.bindings.removeAll { $0 === binding }
        if path.subscribers.isEmpty && path.bindings.isEmpty { dropWatchedPath(path) }
    }

    /// Removes one subscription (and its watched path when it was the last). False if absent.
    @discardableResult
    func remove(_ id: SubscriptionID) -> Bool {
        guard let observation = byID.removeValue(forKey: id) else { return false }
        forgetConnection(of: observation)
        let path = observation.watched
        path.removeSubscriber(observation)
        if path.subscribers.isEmpty && path.bindings.isEmpty { dropWatchedPath(path) }
        return true
    }

    /// Removes every subscription of `connection`, pattern observations included; returns how many.
    @discardableResult
    func removeAll(of connection: ConnectionID) -> Int {
        let patternCount = patterns.removeAll(of: connection)
        guard let observations = byConnection[connection] else { return patternCount }
        for observation in observations { remove(observation.id) }
        return observations.count + patternCount
    }

    /// Removes a watched path with all its subscriptions (its object was deleted). Its bindings must
    /// be removed by the caller (`detach` on a dropped path only forgets them).
    func drop(_ path: WatchedPath) {
        for observation in path.subscribers {
            byID[observation.id] = nil
            forgetConnection(of: observation)
        }
        path.removeAllSubscribers()
        dropWatchedPath(path)
    }

    private func forgetConnection(of observation: Observation) {
        let connection = observation.connection
        guard var list = byConnection.removeValue(forKey: connection) else { return }
        list.removeIndexed(observation, position: \.connectionIndex)
        if !list.isEmpty { byConnection[connection] = list }
    }

    private func dropWatchedPath(_ path: WatchedPath) {
        guard watched[path.key] === path else { return }  // already dropped
        unregister(path)
        watched[path.key] = nil
        rootedAt[path.object]?[ObjectIdentifier(path)] = nil
        if rootedAt[path.object]?.isEmpty == true { rootedAt[path.object] = nil }
    }

    // MARK: - Dependencies

    /// Moves `path`'s registration to `dependencies` (after a write changed what it reads).
    func rebind(_ path: WatchedPath, to dependencies: [StoredLocation]) {
        unregister(path)
        register(path, at: dependencies)
    }

    private func register(_ path: WatchedPath, at dependencies: [StoredLocation]) {
        path.dependencies = dependencies
        path.firstNode = nil
        path.otherNodes.removeAll()
        for location in dependencies {
            var node = roots[location.object] ?? {
                let root = KeyPathNode(key: location.object, parent: nil)
                roots[location.object] = root
                return root
            }()
            for key in location.path { node = node.child(key) }
            node.addWatcher(path)
            if path.firstNode == nil { path.firstNode = node } else { path.otherNodes.append(node) }
        }
    }

    private func unregister(_ path: WatchedPath) {
        for node in path.nodes {
            node.removeWatcher(path)
            var current: KeyPathNode? = node
            while let candidate = current, candidate.isEmpty {
                if let parent = candidate.parent {
                    parent.children[candidate.key] = nil
                    current = parent
                } else {
                    roots[candidate.key] = nil  // a root's key is its object id
                    current = nil
                }
            }
        }
        path.firstNode = nil
        path.otherNodes.removeAll()
        path.dependencies.removeAll()
    }

    // MARK: - Queries

    /// The watched paths a write at `location` can affect: those depending on the location, on
    /// anything containing it, or on anything inside it. Ordered by creation. Cost: the location's
    /// depth plus the affected subtree, whatever else is observed.
    func watchers(affectedBy location: StoredLocation) -> [WatchedPath] {
        guard var node = roots[location.object] else { return [] }
        // A watched path registered at several affected nodes is collected once: each query stamps
        // what it collected with its own number (cheaper than a set).
        queryStamp &+= 1
        var collected = WatcherCollection(stamp: queryStamp)
        collected.add(node.watchers)
        for key in location.path {
            guard let next = node.children[key] else { return collected.inSubscriptionOrder }
            node = next
            collected.add(node.watchers)
        }
        if !node.children.isEmpty {
            for child in node.children.values { child.collectWatchersBelow(into: &collected) }
        }
        return collected.inSubscriptionOrder
    }

    /// Subscriptions observing a key path of `object` (not those reading it through a reference),
    /// in subscription order.
    func observations(on object: String) -> [Observation] {
        guard let paths = rootedAt[object] else { return [] }
        return paths.values.flatMap(\.subscribers).sorted { $0.id < $1.id }
    }
}
