/// One node of `PatternIndex`'s trie: the pattern observations whose literal prefix (the id text
/// before the first `*`, or the whole id of an exact pattern) ends here, and the nodes one byte on.
///
/// Owned by `PatternIndex`; loop thread only.
final class PatternIndexNode {
    /// The byte that leads here from `parent` (unused at the root).
    let byte: UInt8
    weak var parent: PatternIndexNode?
    var children: [UInt8: PatternIndexNode] = [:]
    /// The pattern observations whose literal prefix ends at this node, unordered
    /// (`PatternObservation.nodeIndex` is each one's position).
    var observations: [PatternObservation] = []

    init(byte: UInt8, parent: PatternIndexNode?) {
        self.byte = byte
        self.parent = parent
    }

    /// Whether nothing is held here or below (the node can go).
    var isEmpty: Bool { observations.isEmpty && children.isEmpty }
}
