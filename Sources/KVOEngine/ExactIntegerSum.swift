/// A sum of 64-bit integers that is exact whatever order they come in: a wrapping 64-bit sum and how many
/// times it wrapped up (+1) or down (-1). The true sum is `wrapped + wraps × 2^64`; it fits an `Int64`
/// exactly when `wraps` is 0, so `[2^63-1, 1, -1]` sums to 2^63-1 although a partial sum overflowed.
/// Adding and removing are O(1) without allocation (for `AggregateCache`'s per-set path). A value type;
/// any thread.
struct ExactIntegerSum: Equatable {
    private var wrapped: Int64 = 0
    private var wraps = 0

    /// The sum, when it fits an `Int64`.
    var exactValue: Int64? { wraps == 0 ? wrapped : nil }

    mutating func add(_ integer: Int64) {
        let (result, overflow) = wrapped.addingReportingOverflow(integer)
        wrapped = result
        if overflow { wraps += integer > 0 ? 1 : -1 }
    }

    mutating func subtract(_ integer: Int64) {
        let (result, overflow) = wrapped.subtractingReportingOverflow(integer)
        wrapped = result
        if overflow { wraps += integer > 0 ? -1 : 1 }
    }
}
