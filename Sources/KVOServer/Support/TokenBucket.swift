/// A rate bound as a token bucket: up to `capacity` events at once, then `perSecond` a second. Like
/// `RateLimitedCount` it is a value its owner keeps and feeds with the server's clock (`at now`, milliseconds of
/// `ServerClock`, any monotonic clock), so a test turns a manual clock instead of sleeping. Tokens are counted
/// in thousandths, so the refill is exact integer arithmetic. Owned by one connection (`Connection.signalTokens`);
/// loop thread only.
struct TokenBucket {
    let capacity: UInt64
    let perSecond: UInt64
    /// Thousandths of a token.
    private var tokens: UInt64
    private var lastRefill: UInt64?

    /// A connection's `signal`s (docs/protocol.md, "Signals"): 100 at once, then 100 a second.
    static let signals = TokenBucket(capacity: 100, perSecond: 100)

    init(capacity: UInt64, perSecond: UInt64) {
        self.capacity = capacity
        self.perSecond = max(perSecond, 1)
        tokens = capacity * 1000
    }

    /// Takes one token at `now`: nil when there was one, else the milliseconds until one will be (nothing taken).
    mutating func take(at now: UInt64) -> UInt64? {
        if let lastRefill, now > lastRefill {
            tokens = min(capacity * 1000, tokens &+ (now - lastRefill) * perSecond)
        }
        if lastRefill == nil || now > lastRefill! { lastRefill = now }
        guard tokens < 1000 else {
            tokens -= 1000
            return nil
        }
        let missing = 1000 - tokens
        return (missing + perSecond - 1) / perSecond
    }
}
