#if canImport(Glibc)
import Glibc
import KVOEngine
import KVOModel
#endif

/// Recent password failures per peer address, decaying with time: each failure adds 1, and a score
/// halves every `halfLife` milliseconds. Used to schedule password checks (`PasswordVerificationQueue`):
/// an address that has been guessing waits behind everyone else.
///
/// At most `maximumPeers` addresses are tracked; past it the faded ones are forgotten first. Owned by
/// the verification queue; loop thread only.
struct PeerFailureScores {
    /// Milliseconds for a score to halve.
    let halfLife: Double
    let maximumPeers: Int
    private var scores: [String: (score: Double, at: UInt64)] = [:]

    init(halfLife: Double = 60_000, maximumPeers: Int = 4096) {
        self.halfLife = halfLife
        self.maximumPeers = maximumPeers
    }

    /// The score of `peer` at `now` (milliseconds, the loop's clock); 0 for an unknown peer.
    func score(of peer: String, now: UInt64) -> Double {
        guard let entry = scores[peer] else { return 0 }
        return decayed(entry, now: now)
    }

    /// Counts one failure of `peer` at `now`.
    mutating func recordFailure(of peer: String, now: UInt64) {
        let current = score(of: peer, now: now)
        if scores[peer] == nil, scores.count >= maximumPeers { forgetFaded(now: now) }
        scores[peer] = (current + 1, now)
    }

    private func decayed(_ entry: (score: Double, at: UInt64), now: UInt64) -> Double {
        let elapsed = Double(now &- entry.at)
        return elapsed <= 0 ? entry.score : entry.score * pow(0.5, elapsed / halfLife)
    }

    /// Forgets addresses whose score has faded below a tenth of a failure, or, if none has, the
    /// lowest half.
    private mutating func forgetFaded(now: UInt64) {
        let before = scores.count
        scores = scores.filter { decayed($0.value, now: now) >= 0.1 }
        guard scores.count == before else { return }
        let sorted = scores.sorted { decayed($0.value, now: now) < decayed($1.value, now: now) }
        for (peer, _) in sorted.prefix(sorted.count / 2) { scores.removeValue(forKey: peer) }
    }
}
