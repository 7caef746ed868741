import KVOJSON
import KVOModel

/// The limits every stored value obeys, checked before a write changes anything (`too_large`, no
/// event). Loop thread only, as the engine.
extension KVOEngine {
    /// The largest revision and the largest binding id the engine hands out (2^62), which is also the
    /// largest the persistent store accepts when it loads: far beyond what any store reaches, far
    /// enough below `Int64.max` that no increment or conversion can overflow. A write (or `bind`) that
    /// would pass it is refused with `too_large`, so whatever was committed always loads again.
    public static let maximumCounter: UInt64 = 1 << 62

    /// Refuses a write when the revision counter has reached `maximumCounter`.
    @inline(__always)
    func checkRevisionRoom() throws(KVOError) {
        guard revision < KVOEngine.maximumCounter else {
            throw KVOError(.tooLarge, "the revision counter has reached its maximum (\(KVOEngine.maximumCounter)): no more writes")
        }
    }

    /// Refuses `value` when storing it `levels` levels inside object `object` (the object itself
    /// counts as the first level: 0 for a whole object, the key path's length for a `set`, one more
    /// for an array element) would make the object deeper than `StoredDepth.maximum`.
    ///
    /// Every stored object is within the limit, and a write only replaces the subtree at its
    /// location, so checking the written value at its depth keeps the whole object within it.
    ///
    /// `encodedBytes`, when known, is the value's length as compact JSON: every level of nesting takes at
    /// least two of its bytes (`[]`, `{}`), so a value of at most `2 * room` bytes fits without a walk.
    func checkDepth(of value: JSONValue, storedAt levels: Int, in object: String, encodedBytes: Int? = nil) throws(KVOError) {
        let room = StoredDepth.maximum - levels
        // Scalars (the usual value) cost nothing more than the switch.
        if value.isScalar, room >= 0 { return }
        if let encodedBytes, room >= 0, encodedBytes <= 2 * room { return }
        guard room < 0 || value.nestingDepth(upTo: room) > room else { return }
        throw tooDeep(object)
    }

    /// The refusal of a value that would make `object` nest deeper than `StoredDepth.maximum`.
    func tooDeep(_ object: String) -> KVOError {
        KVOError(.tooLarge, """
            the value would make object '\(PrintableText.escaped(object))' nest deeper than \(StoredDepth.maximum) \
            levels (the object, the key path to the value and the value's own nesting count together); \
            the limit is \(StoredDepth.maximum)
            """, details: ["limit": .int(Int64(StoredDepth.maximum))])
    }

    /// `checkDepth` for each element that an array mutation puts into the array at `location`.
    func checkDepth(of mutation: CollectionMutation, at location: StoredLocation) throws(KVOError) {
        for value in mutation.values where !value.isScalar {
            try checkDepth(of: value, storedAt: location.path.count + 1, in: location.object)
        }
    }

    /// Refuses a value of `bytes` (compact JSON) over `sizeLimits.maximumValueBytes`.
    @inline(__always)
    func checkValueSize(_ bytes: Int, in object: String) throws(KVOError) {
        guard bytes > sizeLimits.maximumValueBytes else { return }
        throw KVOError(.tooLarge, """
            the value is \(bytes) bytes as JSON, more than the limit of \(sizeLimits.maximumValueBytes) \
            (--max-value-bytes); object '\(PrintableText.escaped(object))' is unchanged
            """, details: ["limit": .int(Int64(sizeLimits.maximumValueBytes))])
    }

    /// Refuses a new observation for `connection` when it holds `maximumObservationsPerConnection`.
    func checkObservationRoom(for connection: ConnectionID) throws(KVOError) {
        guard maximumObservationsPerConnection != .max,
              registry.count(of: connection) >= maximumObservationsPerConnection else { return }
        throw KVOError(.tooManyObservations, """
            this connection holds \(maximumObservationsPerConnection) observations, the limit \
            (--max-observations-per-connection); unobserve some first
            """, details: ["limit": .int(Int64(maximumObservationsPerConnection))])
    }

    /// Refuses a write that would add `growth` bytes to `storedBytes` past `sizeLimits.maximumStoredBytes`
    /// (`--max-memory`). A write that adds nothing (or frees bytes) always passes, however full the store.
    @inline(__always)
    func checkQuota(growth: Int) throws(KVOError) {
        guard growth > 0, growth > sizeLimits.maximumStoredBytes - storedBytes else { return }
        throw quotaExceeded(growth: growth)
    }

    /// The refusal of a write that would add `growth` bytes to `storedBytes` past the quota:
    /// `quota_exceeded`, with the limit and what is stored now.
    func quotaExceeded(growth: Int) -> KVOError {
        KVOError(.quotaExceeded, """
            the store holds \(storedBytes) bytes and the write would add \(growth), past the limit of \
            \(sizeLimits.maximumStoredBytes) (--max-memory); nothing changed: delete or shrink data to make room
            """, details: ["limit": .int(Int64(sizeLimits.maximumStoredBytes)), "used": .int(Int64(storedBytes))])
    }

    /// The refusal of a write that would make `object` `size` bytes, over `sizeLimits.maximumObjectBytes`.
    func objectTooLarge(_ object: String, size: Int) -> KVOError {
        KVOError(.tooLarge, """
            the write would make object '\(PrintableText.escaped(object))' \(size) bytes as JSON, more than the limit of \
            \(sizeLimits.maximumObjectBytes) (--max-object-bytes); nothing changed
            """, details: ["limit": .int(Int64(sizeLimits.maximumObjectBytes))])
    }
}

extension CollectionChange {
    /// How many bytes the array's compact JSON grew by (negative: shrank) through `change`, which left
    /// it with `resultingCount` elements: the elements put in less those taken out, and the commas
    /// between elements.
    static func sizeGrowth(of change: CollectionChange, resultingCount: Int) -> Int {
        var growth = 0
        for value in change.new { growth += JSONWriter.encodedLength(of: value) }
        for value in change.old { growth -= JSONWriter.encodedLength(of: value) }
        switch change.kind {
        case .insertion:
            let inserted = change.new.count
            growth += resultingCount == inserted ? inserted - 1 : inserted
        case .removal:
            let removed = change.old.count
            growth -= resultingCount == 0 ? removed - 1 : removed
        case .replacement, .setting:
            break
        }
        return growth
    }
}
