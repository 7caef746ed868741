import KVOEngine
import KVOModel

/// When each peer address last logged in successfully (`auth` with a password or a token),
/// so that password checks from addresses that have proven themselves recently skip the budget for
/// unproven checks (`PasswordVerificationQueue`, docs/design.md "Password checks").
///
/// At most `maximumPeers` addresses are remembered; past it the ones not seen for `window` are
/// forgotten, or, if none is, the older half. Owned by the verification queue; loop thread only.
struct PeerSuccesses {
    /// Milliseconds a success keeps an address proven.
    let window: UInt64
    let maximumPeers: Int
    private var lastSuccess: [String: UInt64] = [:]

    init(window: UInt64 = 3_600_000, maximumPeers: Int = 4096) {
        self.window = window
        self.maximumPeers = max(2, maximumPeers)
    }

    /// Whether `peer` logged in successfully within `window` before `now` (milliseconds, the loop's clock).
    func hasRecentSuccess(_ peer: String, now: UInt64) -> Bool {
        guard let at = lastSuccess[peer] else { return false }
        return now &- at <= window || at > now
    }

    /// Records a success of `peer` at `now`.
    mutating func recordSuccess(of peer: String, now: UInt64) {
        if lastSuccess[peer] == nil, lastSuccess.count >= maximumPeers { forgetOld(now: now) }
        lastSuccess[peer] = now
    }

    private mutating func forgetOld(now: UInt64) {
        let before = lastSuccess.count
        lastSuccess = lastSuccess.filter { now &- $0.value <= window }
        guard lastSuccess.count == before else { return }
        let sorted = lastSuccess.sorted { $0.value < $1.value }
        for (peer, _) in sorted.prefix(sorted.count / 2) { lastSuccess.removeValue(forKey: peer) }
    }
}
