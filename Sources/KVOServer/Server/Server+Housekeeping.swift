import CLibUV
import KVOJSON
import Logging
#if canImport(Glibc)
import Glibc
import KVOEngine
import KVOModel
#endif

/// The housekeeping tick: deadlines (first request, login, TLS handshake), suppressed-log summaries, giving memory back.
/// Loop thread only, like the rest of `Server`.
extension Server {
    /// The housekeeping tick: closes connections that sent no request before their deadline, and
    /// returns memory to the system once the buffers have drained after a burst.
    func housekeep() {
        let now = clock.milliseconds
        clock.refreshWallClockOffset()
        expireDueObjects()
        endDueSessions()
        if now &- lastStorageCheck >= 1000 {
            lastStorageCheck = now
            checkStorage()
        }
        if let cluster {
            expireClusterWrites(cluster, now: now)
            expireRevisionWaits(cluster, now: now)
            retryIntegrityRepair(cluster, now: now)
        }
        if !firstRequestDeadlines.isEmpty {
            for due in firstRequestDeadlines.takeDue(now: now) {
                guard let connection = connection(due.connection)?.takeUnretainedValue(), !connection.hasSentRequest,
                      !connection.isClosing
                else { continue }
                connection.close(reason: .noRequestBeforeTimeout(seconds: configuration.firstRequestTimeout))
            }
        }
        if !loginDeadlines.isEmpty {
            for due in loginDeadlines.takeDue(now: now) {
                guard let connection = connection(due.connection)?.takeUnretainedValue(), connection.principal == nil,
                      !connection.isClosing, !connection.pausedReasons.contains(.verification)
                else { continue }
                connection.close(reason: .notLoggedInBeforeTimeout(seconds: configuration.loginTimeout))
            }
        }
        if !tlsHandshakeDeadlines.isEmpty {
            for due in tlsHandshakeDeadlines.takeDue(now: now) {
                guard let connection = connection(due.connection)?.takeUnretainedValue(), connection.isAwaitingTLSHandshake,
                      !connection.isClosing
                else { continue }
                connection.close(reason: .tlsHandshakeTimeout(seconds: configuration.tls?.handshakeTimeout ?? 0))
            }
        }
        for slot in closingLogLimits.indices {
            if let count = closingLogLimits[slot].takeUnreported(at: now) { logSuppressedClosings(count, slot: slot) }
        }
        if let count = authenticationFailureLog.takeUnreported(at: now) { logSuppressedAuthenticationFailures(count) }
        let pool = loop.outputChunks
        peakBufferedInputBytes = max(peakBufferedInputBytes, loop.bufferedInputBytes)
        let current = pool.bytesInUse + loop.bufferedInputBytes
        if heapTrimmer.trimIfWorthwhile(peak: pool.peakBytesInUse + peakBufferedInputBytes, current: current, now: now) {
            pool.resetPeak()
            peakBufferedInputBytes = loop.bufferedInputBytes
            logger.debug("returned free memory to the system after a burst")
        }
    }
}
