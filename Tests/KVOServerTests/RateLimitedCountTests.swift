import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// `RateLimitedCount`: one report line per interval with the count of events since the last one;
/// what is held back is reported with the next event or by the periodic `takeUnreported(at:)`.
@Suite struct RateLimitedCountTests {
    @Test func reportsTheFirstEventAtOnceAndCountsTheRestOfTheInterval() {
        var limit = RateLimitedCount(interval: 1000)
        #expect(limit.record(at: 5000) == 1)
        for now in stride(from: UInt64(5001), through: 5999, by: 2) { #expect(limit.record(at: now) == nil) }
        // Not over yet: nothing for the timer to report.
        #expect(limit.takeUnreported(at: 5999) == nil)
        // The next event after the interval reports itself and the 500 held back.
        #expect(limit.record(at: 6000) == 501)
        #expect(limit.record(at: 6500) == nil)
        // With no further event, the timer reports the one held back, once.
        #expect(limit.takeUnreported(at: 6999) == nil)
        #expect(limit.takeUnreported(at: 7000) == 1)
        #expect(limit.takeUnreported(at: 8000) == nil)
        #expect(limit.record(at: 8000) == 1)
    }

    @Test func aFreshCountReportsAtOnceAtAnyTime() {
        var limit = RateLimitedCount()
        #expect(limit.takeUnreported(at: 0) == nil)
        #expect(limit.record(at: 0) == 1)
        #expect(limit.record(at: 999) == nil)
        #expect(limit.takeUnreported() == 1)
        #expect(limit.takeUnreported() == nil)
        var other = RateLimitedCount()
        #expect(other.record(at: UInt64.max) == 1)
    }
}
