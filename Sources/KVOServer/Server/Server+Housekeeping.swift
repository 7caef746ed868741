import CLibUV
import KVOJSON
import Logging
#if canImport(Glibc)
import Glibc
import KVOEngine
import KVOModel
#endif

/// The housekeeping tick: deadlines (first request, login, TLS handshake), the idle sweep, suppressed-log summaries,
/// giving memory back.
/// Loop thread only, like the rest of `Server`.
extension Server {
    /// The housekeeping tick: closes connections that sent no request before their deadline, and
    /// returns memory to the system once the buffers have drained after a burst.
    func housekeep() {
        let now = clock.milliseconds
        slowLog.activity.housekeeping = true
        clock.refreshWallClockOffset()
        expireDueObjects()
        if let cluster { replicatedPresenceTick(cluster) } else { endDueSessions() }
        let secondTick = storage.checkIsDue(now: now)
        if secondTick { checkStorage() }
        reclaimSpaceOnTick(secondTick: secondTick)
        endIdleBackup(now: now)
        if let cluster {
            expireClusterWrites(cluster, now: now)
            expireRevisionWaits(cluster, now: now)
            retryIntegrityRepair(cluster, now: now)
        }
        closeConnectionsPastDeadlines(now: now)
        sweepIdleConnections(now: now)
        rateLimitedLog.reportHeldBack(at: now, logger: logger)
        if heapTrimmer.trimAfterBurst(pool: loop.outputChunks, bufferedInputBytes: loop.bufferedInputBytes, now: now) {
            logger.debug("returned free memory to the system after a burst")
        }
    }

    /// Closes the connections past a deadline (`ConnectionDeadlines`) that have not done what it was for.
    func closeConnectionsPastDeadlines(now: UInt64) {
        if !deadlines.firstRequest.isEmpty {
            for due in deadlines.firstRequest.takeDue(now: now) {
                guard let connection = connection(due.connection)?.takeUnretainedValue(), !connection.hasSentRequest,
                      !connection.isClosing
                else { continue }
                connection.close(reason: .noRequestBeforeTimeout(seconds: configuration.firstRequestTimeout))
            }
        }
        if !deadlines.login.isEmpty {
            for due in deadlines.login.takeDue(now: now) {
                guard let connection = connection(due.connection)?.takeUnretainedValue(), connection.principal == nil,
                      !connection.isClosing, !connection.pausedReasons.contains(.verification)
                else { continue }
                connection.close(reason: .notLoggedInBeforeTimeout(seconds: configuration.loginTimeout))
            }
        }
        if !deadlines.tlsHandshake.isEmpty {
            for due in deadlines.tlsHandshake.takeDue(now: now) {
                guard let connection = connection(due.connection)?.takeUnretainedValue(), connection.isAwaitingTLSHandshake,
                      !connection.isClosing
                else { continue }
                connection.close(reason: .tlsHandshakeTimeout(seconds: configuration.tls?.handshakeTimeout ?? 0))
            }
        }
    }
}
