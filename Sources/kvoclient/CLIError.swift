/// Failures that the command-line client detects itself (the library reports the others).
enum CLIError: Error, CustomStringConvertible {
    /// The server closed a subscription stream while subscriptions were still active.
    case streamEnded(endpoint: String, activeSubscriptions: Int)
    /// The connection was lost (`subscribe --no-reconnect`) for another reason than the server closing
    /// it: the heartbeat went unanswered, a socket error.
    case connectionLost(String)
    /// A reply lacked a field the protocol promises.
    case unexpectedReply(String)
    /// `backup`: the file cannot be written or named (it exists, a directory is missing or not writable).
    case backupFile(String)

    var description: String {
        switch self {
        case let .streamEnded(endpoint, active):
            let noun = active == 1 ? "subscription" : "subscriptions"
            return "the server at \(endpoint) closed the connection (\(active) \(noun) still active)"
        case let .connectionLost(reason):
            return reason
        case let .unexpectedReply(reply):
            return "unexpected reply from the server: \(reply)"
        case let .backupFile(reason):
            return reason
        }
    }

    /// Connection-level problems, except a backup file that cannot be written (a usage error: name another).
    var exitCode: Int32 {
        if case .backupFile = self { return 2 }
        return 3
    }
}
