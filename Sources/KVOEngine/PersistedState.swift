import KVOJSON

/// The state a server starts from: every object, the revision counter, the most recent history
/// (oldest first), every class and binding definition, and the binding id counter.
package struct PersistedState: Sendable {
    /// Every object, packed as the store loaded it (`ObjectTable`).
    package var objects: ObjectTable
    /// The ids of `objects` in order when the loader built them (nil: the engine sorts `objects`' ids).
    package var sortedIDs: SortedObjectIDs?
    package var revision: UInt64
    package var history: [HistoryEntry]
    /// Every defined class: name → definition JSON, as it was committed.
    package var classes: [String: JSONValue]
    /// Every live binding: id → definition JSON, as it was committed.
    package var bindings: [UInt64: JSONValue]
    /// The highest binding id ever handed out; never lower than the highest id in `bindings`.
    package var lastBindingID: UInt64

    package init(objects: ObjectTable = [:], revision: UInt64 = 0, history: [HistoryEntry] = [],
                classes: [String: JSONValue] = [:], bindings: [UInt64: JSONValue] = [:], lastBindingID: UInt64 = 0) {
        self.objects = objects
        self.revision = revision
        self.history = history
        self.classes = classes
        self.bindings = bindings
        self.lastBindingID = lastBindingID
    }
}
