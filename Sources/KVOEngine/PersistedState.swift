import KVOJSON

/// The state a server starts from: every object, the revision counter, the most recent history
/// (oldest first), every class and binding definition, and the binding id counter.
public struct PersistedState: Sendable {
    /// Every object, packed as the store loaded it (`ObjectTable`).
    public var objects: ObjectTable
    /// The ids of `objects` in order when the loader built them (nil: the engine sorts `objects`' ids).
    package var sortedIDs: SortedObjectIDs?
    public var revision: UInt64
    public var history: [HistoryEntry]
    /// Every defined class: name → definition JSON, as it was committed.
    public var classes: [String: JSONValue]
    /// Every live binding: id → definition JSON, as it was committed.
    public var bindings: [UInt64: JSONValue]
    /// The highest binding id ever handed out; never lower than the highest id in `bindings`.
    public var lastBindingID: UInt64
    /// The objects' times to live (`KVOEngine+Expiry`), by object.
    public var expiries: [String: Expiry] = [:]

    public init(objects: ObjectTable = [:], revision: UInt64 = 0, history: [HistoryEntry] = [],
                classes: [String: JSONValue] = [:], bindings: [UInt64: JSONValue] = [:], lastBindingID: UInt64 = 0) {
        self.objects = objects
        self.revision = revision
        self.history = history
        self.classes = classes
        self.bindings = bindings
        self.lastBindingID = lastBindingID
    }
}
