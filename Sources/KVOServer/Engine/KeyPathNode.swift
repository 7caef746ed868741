/// A node of one object's key-path trie: the observations of exactly this key path, and the
/// nodes of longer key paths below it.
///
/// The trie lets a change at `a.b` find its observers by walking `a`, `a.b` (ancestors and the path
/// itself) and the subtree under `a.b` (descendants) without looking at any other observation.
/// Owned by `ObservationRegistry`; loop thread only.
final class KeyPathNode {
    /// The keys from the object's root to this node (empty for the root).
    let components: [String]
    /// `components` joined with `.`, as clients wrote it.
    let keyPath: String
    private(set) weak var parent: KeyPathNode?
    var children: [String: KeyPathNode] = [:]
    var observations: [SubscriptionID: Observation] = [:]

    init(components: [String], parent: KeyPathNode?) {
        self.components = components
        self.keyPath = components.joined(separator: ".")
        self.parent = parent
    }

    /// The child for `key`, created when missing.
    func child(_ key: String) -> KeyPathNode {
        if let existing = children[key] { return existing }
        let node = KeyPathNode(components: components + [key], parent: self)
        children[key] = node
        return node
    }

    var isEmpty: Bool { observations.isEmpty && children.isEmpty }

    /// Calls `body` for this node and every node below it that has observations.
    func forEachObservedNode(_ body: (KeyPathNode) -> Void) {
        if !observations.isEmpty { body(self) }
        for child in children.values { child.forEachObservedNode(body) }
    }
}
