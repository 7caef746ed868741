import CLibUV
import KVOModel
#if canImport(Glibc)
import Glibc
import KVOEngine
#endif

/// Runs password checks on the libuv thread pool, at most `concurrency` at once, the rest waiting
/// here (at most `capacity`), and hands each result back on the loop thread.
///
/// Fairness (docs/design.md, "Password checks"): the next check to run is the waiting one from a
/// *proven* peer address (one that logged in within the last hour, `PeerSuccesses`, and has not failed
/// much since) before any other, then the one whose connection has failed least plus whose peer address
/// has failed least recently (`PeerFailureScores`), ties first come first served. Someone guessing
/// passwords from one address piles up failures on its connections and address, so a login from anywhere
/// else goes ahead of all their waiting guesses and waits at most for the checks already running.
///
/// A guesser spread over many addresses fails nowhere before its guesses are checked, so those guesses
/// are bounded instead: at most `unprovenLimit` checks from unproven addresses wait at once. A new
/// unproven check over that budget takes the place of the waiting unproven one with the worst failure
/// score, ties the oldest (that one is turned away, answered without a check), unless the new one has
/// the worse score. So a correct login from a new address waits at most for the checks running and
/// `unprovenLimit - 1` ahead of it, or is told at once to try again; it is never stuck behind a crowd.
///
/// Owned by the server; loop thread only (the thread pool touches only the `PasswordVerification`
/// it runs).
final class PasswordVerificationQueue {
    /// Checks running on the thread pool at once.
    let concurrency: Int
    /// Checks waiting at most; past it the one with the worst scheduling key is turned away.
    let capacity: Int
    /// Checks from unproven peer addresses waiting at most (see the type's comment).
    let unprovenLimit: Int
    /// A proven address stops being treated as proven at this failure score (a few typos are fine).
    static let provenFailureLimit = 3.0
    private let loop: UnsafeMutablePointer<uv_loop_t>
    /// The server's clock (`ServerClock`): failure scores and recent successes are counted on it.
    private let clock: ServerClock
    private var waiting: [PasswordVerification] = []
    private(set) var running = 0
    private var nextSequence: UInt64 = 0
    /// Recent failures per peer address.
    var peerFailures = PeerFailureScores()
    /// Recent successful logins per peer address.
    var peerSuccesses = PeerSuccesses()
    /// Called on the loop thread with each finished check.
    private let finished: (PasswordVerification) -> Void

    init(loop: UnsafeMutablePointer<uv_loop_t>, clock: ServerClock, concurrency: Int, capacity: Int, unprovenLimit: Int = 8,
         finished: @escaping (PasswordVerification) -> Void) {
        self.loop = loop
        self.clock = clock
        self.concurrency = max(1, concurrency)
        self.capacity = max(1, capacity)
        self.unprovenLimit = max(1, min(unprovenLimit, self.capacity))
        self.finished = finished
    }

    /// Checks waiting (not running).
    var waitingCount: Int { waiting.count }

    /// A sequence number for a new check (arrival order).
    func takeSequence() -> UInt64 {
        nextSequence += 1
        return nextSequence
    }

    /// Queues `verification`, starting it at once when a slot is free. When the unproven budget or the
    /// queue is full, one check is turned away and returned (a waiting one, or `verification` itself):
    /// the caller answers it without a check (it is not a failure).
    func submit(_ verification: PasswordVerification, now: UInt64) -> PasswordVerification? {
        var turnedAway: PasswordVerification?
        if running >= concurrency, !isProven(verification, now: now) {
            var unproven = 0
            var victim: Int?
            for index in waiting.indices where !isProven(waiting[index], now: now) {
                unproven += 1
                if victim == nil || evictionKey(of: waiting[index], now: now) > evictionKey(of: waiting[victim!], now: now) {
                    victim = index
                }
            }
            if unproven >= unprovenLimit, let victim {
                if score(of: verification, now: now) > score(of: waiting[victim], now: now) { return verification }
                turnedAway = waiting.remove(at: victim)
            }
        }
        if turnedAway == nil, waiting.count >= capacity {
            let worst = worstWaitingIndex(now: now)
            if key(of: verification, now: now) < key(of: waiting[worst], now: now) {
                turnedAway = waiting.remove(at: worst)
            } else {
                return verification
            }
        }
        waiting.append(verification)
        startWaiting(now: now)
        return turnedAway
    }

    /// A successful login from `peer` (any kind): its later checks are proven for a while.
    func recordSuccess(of peer: String, now: UInt64) {
        peerSuccesses.recordSuccess(of: peer, now: now)
    }

    /// Drops the waiting checks of a connection that closed (one running finishes and is ignored).
    func cancelWaiting(of connection: ConnectionID) {
        guard waiting.contains(where: { $0.connection == connection }) else { return }
        waiting.removeAll { $0.connection == connection }
    }

    /// Drops every waiting check (the server is stopping); running ones finish.
    func cancelAllWaiting() { waiting.removeAll() }

    /// Failures of the check's connection plus the recent failures of its address.
    private func score(of verification: PasswordVerification, now: UInt64) -> Double {
        Double(verification.connectionFailures) + peerFailures.score(of: verification.peerHost, now: now)
    }

    /// Whether the check's address logged in recently and has not failed much since.
    private func isProven(_ verification: PasswordVerification, now: UInt64) -> Bool {
        peerSuccesses.hasRecentSuccess(verification.peerHost, now: now)
            && score(of: verification, now: now) < PasswordVerificationQueue.provenFailureLimit
    }

    /// Scheduling order, smallest first: proven before unproven, then by score, then first come.
    private func key(of verification: PasswordVerification, now: UInt64) -> (Int, Double, UInt64) {
        (isProven(verification, now: now) ? 0 : 1, score(of: verification, now: now), verification.sequence)
    }

    /// Which unproven check gives way to a new one, largest first: the worst score, then the oldest.
    private func evictionKey(of verification: PasswordVerification, now: UInt64) -> (Double, UInt64) {
        (score(of: verification, now: now), UInt64.max - verification.sequence)
    }

    private func worstWaitingIndex(now: UInt64) -> Int {
        var worst = 0
        for index in waiting.indices.dropFirst() where key(of: waiting[index], now: now) > key(of: waiting[worst], now: now) {
            worst = index
        }
        return worst
    }

    private func bestWaitingIndex(now: UInt64) -> Int {
        var best = 0
        for index in waiting.indices.dropFirst() where key(of: waiting[index], now: now) < key(of: waiting[best], now: now) {
            best = index
        }
        return best
    }

    private func startWaiting(now: UInt64) {
        while running < concurrency, !waiting.isEmpty {
            let verification = waiting.remove(at: bestWaitingIndex(now: now))
            let work = UnsafeMutablePointer<uv_work_t>.allocate(capacity: 1)
            work.initialize(to: uv_work_t())
            work.pointee.data = Unmanaged.passRetained(Running(verification, queue: self)).toOpaque()
            verification.work = work
            running += 1
            let status = uv_queue_work(loop, work, PasswordVerificationQueue.workCallback, PasswordVerificationQueue.afterWorkCallback)
            if status != 0 {
                // Cannot happen with a live loop; answer it as not matched rather than hang.
                Unmanaged<Running>.fromOpaque(work.pointee.data).release()
                work.deallocate()
                running -= 1
                verification.wipePassword()
                finished(verification)
            }
        }
    }

    private func complete(_ verification: PasswordVerification) {
        running -= 1
        finished(verification)
        startWaiting(now: clock.milliseconds)
    }

    /// What a work request carries: the check and the queue to report to.
    private final class Running: @unchecked Sendable {
        let verification: PasswordVerification
        let queue: PasswordVerificationQueue
        init(_ verification: PasswordVerification, queue: PasswordVerificationQueue) {
            self.verification = verification
            self.queue = queue
        }
    }

    /// Thread pool: the slow part.
    private static let workCallback: uv_work_cb = { work in
        Unmanaged<Running>.fromOpaque(work!.pointee.data).takeUnretainedValue().verification.run()
    }

    /// Loop thread: the result is back (status UV_ECANCELED only if the loop is being torn down).
    private static let afterWorkCallback: uv_after_work_cb = { work, _ in
        let running = Unmanaged<Running>.fromOpaque(work!.pointee.data).takeRetainedValue()
        running.verification.work = nil
        work!.deallocate()
        running.queue.complete(running.verification)
    }
}
