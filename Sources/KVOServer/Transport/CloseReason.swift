/// Why a connection closed, for the log.
enum CloseReason: CustomStringConvertible {
    /// The client closed its end.
    case clientClosed
    /// A read or write failed (libuv's description).
    case socketError(String)
    /// The client did not read fast enough: its queued output passed the limit.
    case outputLimitExceeded(queued: Int, limit: Int)
    /// All connections' queued output together passed `--max-total-output`, and this one had the most
    /// queued of those still open (slow consumers are closed largest first).
    case totalOutputLimitExceeded(queued: Int, total: Int, limit: Int)
    /// All connections' unfinished request lines together passed `--max-total-input`, and this one
    /// held the largest.
    case totalInputLimitExceeded(buffered: Int, total: Int, limit: Int)
    /// No complete request within `--first-request-timeout` of connecting.
    case noRequestBeforeTimeout(seconds: Double)
    /// Over `--max-connections`; told so, then closed.
    case rejected(String)
    /// The server is stopping.
    case serverStopping
    /// Refused for want of file descriptors; told so, then closed (logged once a second at most, by
    /// the server, not per connection).
    case outOfDescriptors

    var description: String {
        switch self {
        case .clientClosed: return "client closed the connection"
        case let .socketError(text): return "socket error: \(text)"
        case let .outputLimitExceeded(queued, limit):
            return "output buffer limit exceeded (\(queued) bytes queued, limit \(limit)): client too slow"
        case let .totalOutputLimitExceeded(queued, total, limit):
            return "total output buffer limit exceeded (\(total) bytes queued on all connections, limit \(limit)): "
                + "closing the slowest consumers first; this one had \(queued) bytes queued"
        case let .totalInputLimitExceeded(buffered, total, limit):
            return "total input buffer limit exceeded (\(total) bytes of unfinished lines on all connections, limit "
                + "\(limit)): this one held the largest, \(buffered) bytes"
        case let .noRequestBeforeTimeout(seconds):
            return "no complete request within \(seconds) s of connecting"
        case let .rejected(text): return "rejected: \(text)"
        case .serverStopping: return "server stopping"
        case .outOfDescriptors: return "rejected: out of file descriptors"
        }
    }

    /// Closings an operator should see at the default log level.
    var isNoteworthy: Bool {
        switch self {
        case .outputLimitExceeded, .totalOutputLimitExceeded, .totalInputLimitExceeded, .noRequestBeforeTimeout, .rejected:
            return true
        default: return false
        }
    }
}
