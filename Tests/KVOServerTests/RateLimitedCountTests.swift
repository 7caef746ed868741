import Testing

@testable import KVOServer

/// `RateLimitedCount`: one occurrence logged per interval, the rest counted and reported once.
@Suite struct RateLimitedCountTests {
    @Test func logsTheFirstOfEachIntervalAndCountsTheRest() {
        var limit = RateLimitedCount(interval: 1000)
        #expect(limit.record(now: 5000) == 0)
        for now in stride(from: UInt64(5001), through: 5999, by: 2) { #expect(limit.record(now: now) == nil) }
        #expect(limit.suppressed == 500)
        // Not over yet: nothing to report.
        #expect(limit.takeSuppressed(now: 5999) == nil)
        // The next occurrence after the interval is logged, with the 500 counted before it.
        #expect(limit.record(now: 6000) == 500)
        #expect(limit.suppressed == 0)
        #expect(limit.record(now: 6500) == nil)
        // With no further occurrence, the housekeeping tick reports the count once.
        #expect(limit.takeSuppressed(now: 7000) == 1)
        #expect(limit.takeSuppressed(now: 8000) == nil)
        #expect(limit.record(now: 8000) == 0)
    }

    @Test func aFreshCountLogsAtOnceAtAnyTime() {
        var limit = RateLimitedCount()
        #expect(limit.record(now: 0) == 0)
        #expect(limit.record(now: 999) == nil)
        #expect(limit.takeSuppressed(now: 1000) == 1)
        var other = RateLimitedCount()
        #expect(other.takeSuppressed(now: 0) == nil)
        #expect(other.record(now: UInt64.max) == 0)
    }
}
