import KVOJSON
import KVOModel

/// Computed values already evaluated for the store as it is now, so that one change evaluates each
/// computed property of each object once, however many observations (or other computed properties)
/// read it.
///
/// Owned by `KVOEngine`, which empties it whenever the store changes (`invalidate()`); readings of an
/// earlier state (history replay) never use it. Loop thread only.
final class ComputedMemo {
    struct Key: Hashable {
        let object: String
        let property: String
    }

    struct Entry {
        let value: JSONValue
        /// What the evaluation read, so that a reading served from the memo still depends on it.
        let dependencies: [StoredLocation]
        /// The budget steps the evaluation took, charged again to a reading served from the memo (so
        /// that whether a reading stays within its budget does not depend on what the memo held).
        let cost: Int
    }

    private var entries: [Key: Entry] = [:]
    /// How many computed values were evaluated (not served from the memo) since the engine started:
    /// for tests and diagnostics.
    private(set) var evaluations = 0

    func entry(object: String, property: String) -> Entry? {
        entries.isEmpty ? nil : entries[Key(object: object, property: property)]
    }

    func store(object: String, property: String, value: JSONValue, dependencies: [StoredLocation], cost: Int) {
        evaluations += 1
        entries[Key(object: object, property: property)] = Entry(value: value, dependencies: dependencies, cost: cost)
    }

    /// Forgets every value (the store changed).
    func invalidate() {
        if !entries.isEmpty { entries.removeAll(keepingCapacity: true) }
    }
}
