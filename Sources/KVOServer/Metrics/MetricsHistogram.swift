import KVOEngine
import KVOModel

/// A Prometheus histogram of durations with fixed bucket bounds, counted in nanoseconds.
///
/// Observing is a short scan of the bounds (a dozen integers) and two additions: no allocation,
/// no floating point, no atomics. A value owned by `ServerMetrics`; loop thread only.
struct MetricsHistogram {
    /// Upper bounds of the buckets, in nanoseconds, ascending (`le` in the exposition).
    let boundsNanoseconds: [UInt64]
    /// Observations per bucket (not cumulative); the last element counts those above every bound.
    private(set) var bucketCounts: [UInt64]
    /// Sum of every observation, in nanoseconds.
    private(set) var sumNanoseconds: UInt64 = 0
    /// Number of observations.
    private(set) var count: UInt64 = 0

    init(boundsNanoseconds: [UInt64]) {
        precondition(!boundsNanoseconds.isEmpty && zip(boundsNanoseconds, boundsNanoseconds.dropFirst()).allSatisfy(<),
                     "histogram bounds must be ascending")
        self.boundsNanoseconds = boundsNanoseconds
        bucketCounts = [UInt64](repeating: 0, count: boundsNanoseconds.count + 1)
    }

    /// Counts one duration.
    @inline(__always)
    mutating func observe(nanoseconds: UInt64) {
        var bucket = 0
        while bucket < boundsNanoseconds.count, nanoseconds > boundsNanoseconds[bucket] { bucket += 1 }
        bucketCounts[bucket] &+= 1
        sumNanoseconds &+= nanoseconds
        count &+= 1
    }

    /// The cumulative counts Prometheus expects: observations at or below each bound, then the total (`+Inf`).
    var cumulativeCounts: [UInt64] {
        var running: UInt64 = 0
        return bucketCounts.map { count in
            running &+= count
            return running
        }
    }

    /// 10 µs … 10 s in steps of about 2.5x: what a loop iteration or a group commit can take, from a quiet
    /// iteration to a stalled disk.
    static let latencyBoundsNanoseconds: [UInt64] = [
        10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
        1_000_000, 2_500_000, 5_000_000, 10_000_000, 25_000_000, 50_000_000,
        100_000_000, 250_000_000, 1_000_000_000, 10_000_000_000,
    ]
}
