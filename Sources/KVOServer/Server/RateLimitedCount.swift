/// Keeps one kind of log line from flooding the log: the first occurrence in each interval is logged
/// in full, later ones in the same interval are only counted, and the count is logged once the
/// interval is over (with the next occurrence, or by the housekeeping tick if none comes).
///
/// Times are milliseconds on the loop's clock (`uv_now`). A value type owned by the server; loop
/// thread only.
struct RateLimitedCount {
    /// Milliseconds during which at most one occurrence is logged in full.
    let interval: UInt64
    /// When the current interval began (the last occurrence logged in full); nil before any.
    private var intervalStart: UInt64?
    /// Occurrences since then that were counted and not logged.
    private(set) var suppressed = 0

    init(interval: UInt64 = 1000) {
        self.interval = interval
    }

    /// Records one occurrence at `now`. Returns nil when it should only be counted; otherwise it
    /// should be logged in full, together with the returned number of earlier occurrences that were
    /// counted and not yet reported (usually 0).
    mutating func record(now: UInt64) -> Int? {
        if let intervalStart, now &- intervalStart < interval {
            suppressed += 1
            return nil
        }
        intervalStart = now
        defer { suppressed = 0 }
        return suppressed
    }

    /// The occurrences counted and not yet reported, once their interval is over (and forgets them);
    /// nil when there are none or the interval is still running.
    mutating func takeSuppressed(now: UInt64) -> Int? {
        guard suppressed > 0, let intervalStart, now &- intervalStart >= interval else { return nil }
        defer { suppressed = 0 }
        return suppressed
    }
}
