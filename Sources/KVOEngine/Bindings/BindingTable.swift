import KVOJSON

/// Every binding in force, indexed by id and by target object, with the work a request leaves for
/// them: bindings whose sources changed (to apply), events for their creators, and definition changes
/// not yet persisted.
///
/// Owned by `KVOEngine`; loop thread only.
final class BindingTable {
    /// Most times one binding may be applied while one request is carried out: beyond it the binding
    /// is taken to be in a loop (through references re-pointed after it was checked) and its write is
    /// refused.
    static let maximumApplicationsPerRequest = 8

    private(set) var byID: [UInt64: Binding] = [:]
    /// Bindings by the object their target is in (for removal when it is deleted).
    private var byTarget: [String: Set<UInt64>] = [:]
    /// The highest id handed out (ids are never reused, across restarts too).
    var lastID: UInt64 = 0
    /// Bindings whose sources changed and that are not yet applied, in the order of the changes.
    var pending: [Binding] = []
    /// Bindings applied at least once in the current request (to reset their counters).
    var appliedInRequest: [Binding] = []
    /// Events for creators, until the server takes them.
    var events: [BindingEvent] = []
    /// Definitions created (JSON) or removed (nil) since the last commit batch, when persisting.
    var uncommitted: [UInt64: JSONValue?] = [:]

    var isEmpty: Bool { byID.isEmpty }

    func add(_ binding: Binding) {
        byID[binding.id] = binding
        byTarget[binding.spec.target.object, default: []].insert(binding.id)
    }

    func remove(_ binding: Binding) {
        byID[binding.id] = nil
        let target = binding.spec.target.object
        byTarget[target]?.remove(binding.id)
        if byTarget[target]?.isEmpty == true { byTarget[target] = nil }
    }

    /// The bindings that write into `object`, by id.
    func targeting(_ object: String) -> [Binding] {
        guard let ids = byTarget[object] else { return [] }
        return ids.sorted().compactMap { byID[$0] }
    }

    /// Every binding, by id.
    var all: [Binding] { byID.keys.sorted().compactMap { byID[$0] } }
}
