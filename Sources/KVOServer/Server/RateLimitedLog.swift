import Logging

/// The log lines a flood could repeat, kept to one a second per kind so that a client opening many connections
/// cannot flood the log: noteworthy closings (one count per `CloseReason.rateLimitSlot`), failed logins, and
/// connections refused for want of file descriptors. What is held back is counted and said in one line with the
/// next one, by the housekeeping tick, or at shutdown.
///
/// Owned by `Server` (a value stored in it); loop thread only.
struct RateLimitedLog {
    private var closings = [RateLimitedCount](repeating: RateLimitedCount(), count: CloseReason.rateLimitSlots)
    /// Failed logins (`Server.authenticationFailed`, which words the line).
    var authenticationFailures = RateLimitedCount()
    /// Connections refused for want of descriptors (`Server.logRefusalForDescriptors`, which words the line).
    var descriptorRefusals = RateLimitedCount()

    /// A noteworthy closing of kind `slot` at `now` (milliseconds): whether it is logged now, the closings of the
    /// kind held back since the last line said first.
    mutating func admitClosing(slot: Int, at now: UInt64, logger: Logger) -> Bool {
        // The count includes this closing: the others were held back since the last line.
        guard let count = closings[slot].record(at: now) else { return false }
        if count > 1 { RateLimitedLog.logSuppressedClosings(count - 1, slot: slot, logger: logger) }
        return true
    }

    /// Says the closings and failed logins held back: those of kinds whose last line is a second old at `now`
    /// (the housekeeping tick), or all (`now` nil: at shutdown).
    mutating func reportHeldBack(at now: UInt64?, logger: Logger) {
        for slot in closings.indices {
            if let count = RateLimitedLog.take(&closings[slot], at: now) {
                RateLimitedLog.logSuppressedClosings(count, slot: slot, logger: logger)
            }
        }
        if let count = RateLimitedLog.take(&authenticationFailures, at: now) {
            logger.warning("\(count) more authentication failure\(count == 1 ? "" : "s") within a second of the last one logged; not logged one by one")
        }
    }

    /// At shutdown: says the refusals for want of descriptors held back.
    mutating func reportHeldBackDescriptorRefusals(logger: Logger) {
        guard let unreported = descriptorRefusals.takeUnreported() else { return }
        logger.warning("refused \(unreported) more connection\(unreported == 1 ? "" : "s") for want of file descriptors")
    }

    /// `count`'s events held back: once its last line is a second old at `now`, or at once (`now` nil).
    private static func take(_ count: inout RateLimitedCount, at now: UInt64?) -> Int? {
        guard let now else { return count.takeUnreported() }
        return count.takeUnreported(at: now)
    }

    /// Logs the closings of one kind that were counted and not logged one by one.
    private static func logSuppressedClosings(_ count: Int, slot: Int, logger: Logger) {
        let connections = count == 1 ? "connection" : "connections"
        logger.warning("\(count) more \(connections) closed (\(CloseReason.rateLimitSummary(slot: slot))) within a second of the last one logged; not logged one by one")
    }
}
