/// Why a connection closed, for the log.
enum CloseReason: CustomStringConvertible {
    /// The client closed its end.
    case clientClosed
    /// A read or write failed (libuv's description).
    case socketError(String)
    /// The client did not read fast enough: its queued output passed the limit.
    case outputLimitExceeded(queued: Int, limit: Int)
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
        case let .rejected(text): return "rejected: \(text)"
        case .serverStopping: return "server stopping"
        case .outOfDescriptors: return "rejected: out of file descriptors"
        }
    }

    /// Closings an operator should see at the default log level.
    var isNoteworthy: Bool {
        switch self {
        case .outputLimitExceeded, .rejected: return true
        default: return false
        }
    }
}
