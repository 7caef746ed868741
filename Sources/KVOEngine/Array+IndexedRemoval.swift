extension Array where Element: AnyObject {
    /// Removes `element` in O(1) from an array whose elements record their own position in
    /// `position` (subscribers of a watched path, a connection's observations, a pattern node's
    /// observations): the last element moves into the gap and its recorded position is updated, so the
    /// order is not kept. Does nothing and returns false when `element` is not at the position it
    /// records (already removed). The caller owns the array and its elements (loop thread).
    @discardableResult
    mutating func removeIndexed(_ element: Element, position: ReferenceWritableKeyPath<Element, Int>) -> Bool {
        let index = element[keyPath: position]
        guard index < count, self[index] === element else { return false }
        let last = removeLast()
        if last !== element {
            self[index] = last
            last[keyPath: position] = index
        }
        return true
    }
}
