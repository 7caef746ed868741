import KVOJSON

/// One stored object held decoded by `ObjectTable` (a `.live` slot): its members, which writes change in
/// place, its size as compact JSON (kept up to date by each write from the size of what it changed) and
/// whether it was written since the table's clock last passed it (`ObjectTable.packExcessLive`).
///
/// A class so that a slot is one word; `ObjectTable` copies it before changing members or size when
/// another table (a copy of the table, e.g. a `PersistedState` made from an engine's objects) shares it,
/// so tables keep value semantics. Loop thread, like the table that holds it.
///
/// A member may be held as text only (`texts`): a `set` of a top-level key whose request carried the value
/// in canonical form, and whose observers read exactly that key, stores the request's text there instead of
/// decoding it (`ObjectTable.setMemberText`). Its key is then not in `members`. Anything that reads the
/// object sees the texts decoded (`value`); anything that changes it otherwise decodes them into `members`
/// first (`decodeTexts`), so the rest of the engine only ever meets decoded members.
package final class LiveObject {
    var members: [String: JSONValue]
    /// Members held as their canonical text only (keys not in `members`); usually empty.
    var texts: [String: CanonicalText]
    var size: Int
    var written: Bool
    /// The revision of the object's last change (its creation or a write to it; 0: unknown), what `ifRev`
    /// compares: set by the table's writing functions, kept when the object is packed again.
    var changed: UInt64

    init(members: [String: JSONValue], texts: [String: CanonicalText] = [:], size: Int, written: Bool, changed: UInt64) {
        self.members = members
        self.texts = texts
        self.size = size
        self.written = written
        self.changed = changed
    }

    /// A separate copy (the members are copy-on-write).
    func copy() -> LiveObject {
        LiveObject(members: members, texts: texts, size: size, written: written, changed: changed)
    }

    /// Every member decoded (a new dictionary when some are held as text; `members` itself otherwise).
    var decodedMembers: [String: JSONValue] {
        guard !texts.isEmpty else { return members }
        var all = members
        for (key, text) in texts { all[key] = text.value }
        return all
    }

    /// Decodes the members held as text into `members`.
    func decodeTexts() {
        guard !texts.isEmpty else { return }
        for (key, text) in texts { members[key] = text.value }
        texts = [:]
    }
}
