import Testing

@testable import KVOServer

/// The signal rate's token bucket (`TokenBucket`, docs/protocol.md "Signals"), fed milliseconds as the server feeds
/// it its clock: exactly the burst at once, then one token per 1000 / rate ms, and the wait it reports is exact.
@Suite struct TokenBucketTests {
    @Test func aBurstThenTheRate() {
        var bucket = TokenBucket.signals
        for _ in 0..<100 { #expect(bucket.take(at: 5_000) == nil) }
        #expect(bucket.take(at: 5_000) == 10, "one token comes every 10 ms")
        #expect(bucket.take(at: 5_009) == 1)
        #expect(bucket.take(at: 5_010) == nil)
        #expect(bucket.take(at: 5_010) == 10)
        // A clock that does not move, or moves back, refills nothing.
        #expect(bucket.take(at: 4_000) == 10)
        // A long pause fills it to the burst, no more.
        for _ in 0..<100 { #expect(bucket.take(at: 60_000) == nil) }
        #expect(bucket.take(at: 60_000) != nil)
    }
}
