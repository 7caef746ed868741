import KVOEngine
import KVOModel

/// Counts repeated events (connections refused for want of descriptors; connections closed for a limit,
/// one count per kind of closing) so that the log gets one line at most every `interval` milliseconds,
/// saying how many happened, instead of one per event.
///
/// `record(at:)` returns the count to report when a line is due (the first event at once, then the
/// events since the last line once `interval` has passed), nil otherwise; events after the last line
/// are reported with the next one, by `takeUnreported(at:)` (the housekeeping tick, once `interval` has passed)
/// or by `takeUnreported()` (at shutdown). Owned by the server; loop thread only.
struct RateLimitedCount {
    /// Milliseconds between two report lines.
    let interval: UInt64
    private var lastReport: UInt64?
    private var pending = 0

    init(interval: UInt64 = 1_000) {
        self.interval = interval
    }

    /// Counts one event at `now` (milliseconds, any monotonic clock); returns how many to report now.
    mutating func record(at now: UInt64) -> Int? {
        pending += 1
        if let lastReport, now &- lastReport < interval { return nil }
        lastReport = now
        defer { pending = 0 }
        return pending
    }

    /// The events counted since the last report line, if any, and starts counting afresh.
    mutating func takeUnreported() -> Int? {
        defer { pending = 0 }
        return pending > 0 ? pending : nil
    }

    /// Like `takeUnreported()`, but only once `interval` has passed since the last report line (for a
    /// periodic timer that reports what `record(at:)` held back when no further event came).
    mutating func takeUnreported(at now: UInt64) -> Int? {
        guard pending > 0, let lastReport, now &- lastReport >= interval else { return nil }
        return takeUnreported()
    }
}
