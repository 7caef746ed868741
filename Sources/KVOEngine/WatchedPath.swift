import KVOModel

/// One observed (object, key path), shared by every subscription to it.
///
/// It is registered in the key-path tries at the locations its last reading depended on
/// (`dependencies`), so a write finds it without looking at anything else; after a write that
/// changes those locations (a re-pointed reference, an array that grew) it is re-registered. One
/// reading and one notification serve all of its subscribers. Owned by `ObservationRegistry`; loop
/// thread only.
final class WatchedPath {
    struct Key: Hashable {
        let object: String
        let keyPath: String
    }

    let object: String
    let keyPath: KeyPath
    /// Bindings whose source this is (usually none): applied after a write changes the reading.
    var bindings: [Binding] = []
    /// Creation order, so that notifications come out in a stable order.
    let serial: Int
    /// Its subscriptions, in no particular order; each knows its index here (`Observation.index`),
    /// so adding and removing one is O(1) and one subscriber costs one array slot.
    private(set) var subscribers: [Observation] = [] {
        didSet {
            cachedRecipients = nil
            cachedPriorRecipients = nil
        }
    }
    /// `recipients`, kept between changes of `subscribers` (a notification per change reads it).
    private var cachedRecipients: [Recipient]?
    /// `priorRecipients`, kept the same way (every change asks, even when no one wants priors).
    private var cachedPriorRecipients: [Recipient]?
    /// Where the last reading looked.
    var dependencies: [StoredLocation] = []
    /// The trie nodes it is registered at, matching `dependencies`: the first inline (usually the
    /// only one), the rest in an array that most watched paths never allocate.
    var firstNode: KeyPathNode?
    var otherNodes: [KeyPathNode] = []

    /// Every node it is registered at.
    var nodes: [KeyPathNode] {
        guard let firstNode else { return [] }
        return [firstNode] + otherNodes
    }
    /// For `@count`/`@sum`/`@avg` over an array of inline elements: the running aggregate, so
    /// that writes to the array do not re-read it (nil otherwise).
    var aggregate: AggregateCache?
    /// What the path read after the last write that could change it: every such write re-reads it
    /// (the tries guarantee it), so this stands in for a fresh reading before the next write.
    var lastReading: Evaluation?
    /// The last `ObservationRegistry.watchers(affectedBy:)` query that collected this path.
    var collectedStamp = 0

    /// Whether the last reading depended on nothing but the value stored at `location`, reached by
    /// the key path through objects of its own object only (no reference, array element, operator or
    /// computed property on the way: each of those adds a dependency or leaves none at the end). A
    /// `set` at exactly `location` then leaves the reading's dependencies and binding as they were,
    /// and its value is the value written (`KVOEngine.reread`'s fast path).
    func readsOnlyStoredValue(at location: StoredLocation) -> Bool {
        // The location and the only dependency usually share the key path's components array (see
        // `WriteTarget.resolve` and `KeyPathEvaluator.evaluate`), so the path comparisons are usually
        // identity checks.
        guard location.path == keyPath.components, location.object == object else { return false }
        let dependencies = self.dependencies
        guard dependencies.count == 1, dependencies[0] == location, case .some = lastReading else { return false }
        return true
    }

    init(object: String, keyPath: KeyPath, serial: Int) {
        self.object = object
        self.keyPath = keyPath
        self.serial = serial
    }

    var key: Key { Key(object: object, keyPath: keyPath.string) }

    func addSubscriber(_ observation: Observation) {
        observation.index = subscribers.count
        subscribers.append(observation)
    }

    func removeSubscriber(_ observation: Observation) {
        subscribers.removeIndexed(observation, position: \.index)
    }

    func removeAllSubscribers() {
        subscribers.removeAll()
    }

    var recipients: [Recipient] {
        if let cachedRecipients { return cachedRecipients }
        let list = subscribers.map(\.recipient).sorted { $0.subscription < $1.subscription }
        cachedRecipients = list
        return list
    }

    /// Subscribers that asked for prior notifications.
    var priorRecipients: [Recipient] {
        if let cachedPriorRecipients { return cachedPriorRecipients }
        let list = subscribers.filter { $0.options.contains(.prior) }.map(\.recipient)
        cachedPriorRecipients = list
        return list
    }
}
