import KVOModel

/// One pattern observation (docs/protocol.md, "Observing object sets (patterns)"): a connection
/// observing the creations and deletions of the objects whose ids match a pattern (an id set, no key
/// path), or a key path on every such object, present and future.
///
/// Unlike an `Observation` it is not registered in the key-path tries: it lives in `PatternIndex`
/// (a trie over the pattern's literal prefix), and a write to an object finds the pattern observations
/// whose prefix its id starts with. Owned by `ObservationRegistry`; loop thread only.
final class PatternObservation {
    let id: SubscriptionID
    let connection: ConnectionID
    /// What the events carry (`new`, `old`, `prior`, `initial`, the compact encoding).
    let options: ObservationOptions
    /// The connection's permission checks, shared with it; nil for an unrestricted caller.
    let access: ConnectionAccess?
    /// Which ids it follows: an exact id, or a glob where `*` stands for any run of characters.
    let pattern: ObjectIDPattern
    /// The key path followed on every matching object; nil for an id-set observation.
    let keyPath: KeyPath?
    /// A live query's `where`: only the matching objects on which it holds are in the set (events
    /// `entered` and `left` as objects come and go); nil for every matching object.
    let filter: LiveQuery?
    /// Position in its `PatternIndex` node's list, or in its equality bucket's (a filter with an
    /// `indexTerm`).
    var nodeIndex = 0
    /// Position in the index's list of its connection's pattern observations.
    var connectionIndex = 0
    /// The node of `PatternIndex` that holds it (the end of its literal prefix).
    unowned(unsafe) var node: PatternIndexNode?

    init(id: SubscriptionID, connection: ConnectionID, options: ObservationOptions, access: ConnectionAccess?,
         pattern: ObjectIDPattern, keyPath: KeyPath?, filter: LiveQuery? = nil) {
        self.id = id
        self.connection = connection
        self.options = options
        self.access = access
        self.pattern = pattern
        self.keyPath = keyPath
        self.filter = filter
    }

    /// Whether this observer may read `object` (the one an event would name).
    func mayRead(_ object: String) -> Bool {
        guard let access, !access.isUnrestricted else { return true }
        return access.allows(.read, on: object)
    }

    /// Whether this observer may read every object `locations` name (a key path's reading).
    func mayRead(_ locations: [StoredLocation]) -> Bool {
        guard let access, !access.isUnrestricted else { return true }
        return access.allowsRead(locations)
    }

    var recipient: Recipient {
        Recipient(connection: connection, subscription: id, options: options)
    }
}
