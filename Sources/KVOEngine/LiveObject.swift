import KVOJSON

/// One stored object held decoded by `ObjectTable` (a `.live` slot): its members, which writes change in
/// place, its size as compact JSON (kept up to date by each write from the size of what it changed) and
/// whether it was written since the table's clock last passed it (`ObjectTable.packExcessLive`).
///
/// A class so that a slot is one word; `ObjectTable` copies it before changing members or size when
/// another table (a copy of the table, e.g. a `PersistedState` made from an engine's objects) shares it,
/// so tables keep value semantics. Loop thread, like the table that holds it.
package final class LiveObject {
    var members: [String: JSONValue]
    var size: Int
    var written: Bool

    init(members: [String: JSONValue], size: Int, written: Bool) {
        self.members = members
        self.size = size
        self.written = written
    }

    /// A separate copy (the members are copy-on-write).
    func copy() -> LiveObject {
        LiveObject(members: members, size: size, written: written)
    }
}
