import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// `RateLimitedCount`: one report line per interval with the count of events since the last one;
/// what is held back is reported with the next event or by the periodic `takeUnreported(at:)`.
@Suite struct RateLimitedCountTests {
    @Test func reportsTheFirstEventAtOnceAndCountsTheRestOfTheInterval() {
        var limit = RateLimitedCount(interval: 1000)
        expectEqual(limit.record(at: 5000), 1)
        for now in stride(from: UInt64(5001), through: 5999, by: 2) { #expect(limit.record(at: now) == nil) }
        // Not over yet: nothing for the timer to report.
        expectEqual(limit.takeUnreported(at: 5999), nil)
        // The next event after the interval reports itself and the 500 held back.
        expectEqual(limit.record(at: 6000), 501)
        expectEqual(limit.record(at: 6500), nil)
        // With no further event, the timer reports the one held back, once.
        expectEqual(limit.takeUnreported(at: 6999), nil)
        expectEqual(limit.takeUnreported(at: 7000), 1)
        expectEqual(limit.takeUnreported(at: 8000), nil)
        expectEqual(limit.record(at: 8000), 1)
    }

    @Test func aFreshCountReportsAtOnceAtAnyTime() {
        var limit = RateLimitedCount()
        expectEqual(limit.takeUnreported(at: 0), nil)
        expectEqual(limit.record(at: 0), 1)
        expectEqual(limit.record(at: 999), nil)
        expectEqual(limit.takeUnreported(), 1)
        expectEqual(limit.takeUnreported(), nil)
        var other = RateLimitedCount()
        expectEqual(other.record(at: UInt64.max), 1)
    }
}
