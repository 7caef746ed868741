/// A node of one object's trie of locations: the watched paths that depend on exactly this
/// location, and the nodes of longer paths below it.
///
/// A write at `a.b` of an object finds every watched path it can affect by walking the root, `a`,
/// `a.b` (readings of the location and of what contains it) and the subtree under `a.b` (readings
/// inside it), without looking at any other observation. Owned by `ObservationRegistry`; loop
/// thread only.
final class KeyPathNode {
    let key: String
    /// Unowned: a parent outlives its children (a node is removed from its parent only once it is
    /// empty, and its parent after it). No weak reference, so no side table per node.
    private(set) unowned(unsafe) var parent: KeyPathNode?
    var children: [String: KeyPathNode] = [:]
    /// The watched paths registered here: usually one, so an array, not a dictionary.
    var watchers: [WatchedPath] = []

    init(key: String, parent: KeyPathNode?) {
        self.key = key
        self.parent = parent
    }

    /// The child for `key`, created when missing.
    func child(_ key: String) -> KeyPathNode {
        if let existing = children[key] { return existing }
        let node = KeyPathNode(key: key, parent: self)
        children[key] = node
        return node
    }

    var isEmpty: Bool { watchers.isEmpty && children.isEmpty }

    func addWatcher(_ path: WatchedPath) {
        if !watchers.contains(where: { $0 === path }) { watchers.append(path) }
    }

    func removeWatcher(_ path: WatchedPath) {
        if let index = watchers.firstIndex(where: { $0 === path }) { watchers.swapAt(index, watchers.count - 1); watchers.removeLast() }
    }

    /// Adds the watchers of this node and of every node below it to `collection`.
    func collectWatchersBelow(into collection: inout WatcherCollection) {
        collection.add(watchers)
        for child in children.values { child.collectWatchersBelow(into: &collection) }
    }
}
