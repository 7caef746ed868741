/// One node of `PatternIndex`'s trie: the pattern observations whose literal prefix (the id text
/// before the first `*`, or the whole id of an exact pattern) ends here, and the nodes one byte on.
///
/// Owned by `PatternIndex`; loop thread only.
final class PatternIndexNode {
    /// The byte that leads here from `parent` (unused at the root).
    let byte: UInt8
    /// The node one byte up (nil at the root). Unowned, not weak: a parent holds its children, so it
    /// outlives them, and a weak reference would give every node a side table, making each retain and
    /// release on the trie walk of every write take the runtime's slow path.
    unowned(unsafe) let parent: PatternIndexNode?
    /// The nodes one byte on, sorted by `byte`: a binary search over a few bytes, no hashing (a
    /// `Dictionary` hashed each byte of every write's walk with a seeded SipHash).
    private(set) var children: [PatternIndexNode] = []
    /// The pattern observations whose literal prefix ends at this node, unordered
    /// (`PatternObservation.nodeIndex` is each one's position).
    var observations: [PatternObservation] = []

    init(byte: UInt8, parent: PatternIndexNode?) {
        self.byte = byte
        self.parent = parent
    }

    /// The child reached by `byte`, if any.
    @inline(__always)
    func child(_ byte: UInt8) -> PatternIndexNode? {
        let index = position(of: byte)
        return index < children.count && children[index].byte == byte ? children[index] : nil
    }

    /// The child reached by `byte`, made when missing.
    func makeChild(_ byte: UInt8) -> PatternIndexNode {
        let index = position(of: byte)
        if index < children.count, children[index].byte == byte { return children[index] }
        let child = PatternIndexNode(byte: byte, parent: self)
        children.insert(child, at: index)
        return child
    }

    /// Forgets the child reached by `byte` (it became empty).
    func removeChild(_ byte: UInt8) {
        let index = position(of: byte)
        if index < children.count, children[index].byte == byte { children.remove(at: index) }
    }

    /// The index of the first child whose byte is `byte` or greater.
    private func position(of byte: UInt8) -> Int {
        var low = 0
        var high = children.count
        while low < high {
            let middle = (low + high) / 2
            if children[middle].byte < byte { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// Whether nothing is held here or below (the node can go).
    var isEmpty: Bool { observations.isEmpty && children.isEmpty }
}
