import KVOEngine
import KVOModel

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
    /// Nothing at all received (no request, no heartbeat's answer, no WebSocket pong, not a byte) within
    /// `--idle-timeout`: the peer is gone, or its network is (`Server+Liveness`).
    case idleTimeout(seconds: Double)
    /// Over `--max-connections`; told so, then closed.
    case rejected(String)
    /// The server is stopping.
    case serverStopping
    /// Refused for want of file descriptors; told so, then closed (logged once a second at most, by
    /// the server, not per connection).
    case outOfDescriptors
    /// A TLS client's handshake failed (garbage or plaintext instead of a ClientHello, no shared protocol
    /// version, a client certificate that did not verify, ...): OpenSSL's reason.
    case tlsHandshakeFailed(String)
    /// A TLS client did not finish its handshake within `--tls-handshake-timeout`.
    case tlsHandshakeTimeout(seconds: Double)
    /// A TLS record arrived first on the plaintext port: a ClientHello (nil), or another record, named
    /// ("a TLS alert record (fatal unknown_ca)": `TLSRecordHeader.recordName`).
    case tlsOnPlainPort(String?)
    /// An established TLS connection failed (a bad record, a fatal alert): OpenSSL's reason.
    case tlsError(String)
    /// With users defined, no login within `--login-timeout` of connecting.
    case notLoggedInBeforeTimeout(seconds: Double)
    /// Too many failed `auth` requests on this connection; told so, then closed.
    case authenticationFailures(Int)
    /// The user this connection was logged in as was removed (admin `userRemove`).
    case userRemoved(String)
    /// An HTTP connection's response said `Connection: close` (the client asked for it, or HTTP/1.0).
    case httpResponseComplete
    /// An HTTP request kvod refused (malformed, too large, a body, a disallowed Origin): answered with
    /// this status, then closed.
    case httpRefused(status: Int, reason: String)
    /// A WebSocket close handshake: the close frame sent carried `code` (1000 normal, 1002 protocol
    /// error, 1003 binary data, 1007 invalid UTF-8, 1009 message too big, ...).
    case webSocketClosed(code: UInt16)
    /// wslay failed beyond what a close frame can say (out of memory).
    case webSocketFailed
    /// A cluster node replaced its state with a snapshot while serving (`ClusterHealth.diverged`): its
    /// observations are gone; a client reconnects and observes again, resuming with `sinceRev`.
    case clusterStateReplaced
    /// A group commit failed and the server rolled its state back to the last commit
    /// (`Server.rollBackToLastCommit`): the replies and events of the writes undone are dropped with the
    /// connection; a client reconnects (writes are refused while the store cannot take them) and observes
    /// again, resuming with `sinceRev`.
    case storageRolledBack
    /// A server admin closed it (`kill`) from connection `by`, logged in as `user` (nil: open mode).
    case killed(by: ConnectionID, user: String?)

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
        case let .idleTimeout(seconds):
            return "nothing received for \(seconds) s, not even an answer to a heartbeat (--idle-timeout): the peer or its network is gone"
        case let .rejected(text): return "rejected: \(text)"
        case .serverStopping: return "server stopping"
        case .outOfDescriptors: return "rejected: out of file descriptors"
        case let .tlsHandshakeFailed(text): return text
        case let .tlsHandshakeTimeout(seconds): return "TLS handshake not finished within \(seconds) s (--tls-handshake-timeout)"
        case .tlsOnPlainPort(nil):
            return "the client started a TLS handshake on the plaintext port: TLS clients must use the TLS port (--tls-port)"
        case let .tlsOnPlainPort(record?):
            return "the client sent \(record) on the plaintext port: TLS clients must use the TLS port (--tls-port)"
        case let .tlsError(text): return text
        case let .authenticationFailures(count): return "\(count) failed authentication attempts"
        case let .notLoggedInBeforeTimeout(seconds): return "not logged in within \(seconds) s of connecting (--login-timeout)"
        case let .userRemoved(name): return "user '\(name)' was removed"
        case .httpResponseComplete: return "HTTP response sent with Connection: close"
        case let .httpRefused(status, reason): return "HTTP request refused (\(status)): \(reason)"
        case let .webSocketClosed(code): return "WebSocket closed with code \(code)"
        case .webSocketFailed: return "WebSocket framing failed"
        case .clusterStateReplaced: return "this cluster node replaced its state with a snapshot of the cluster's: reconnect and observe again"
        case .storageRolledBack: return "a commit failed and the server rolled back to the last one: reconnect and observe again"
        case let .killed(connection, user):
            return "closed by a server admin (kill from connection \(connection)\(user.map { ", user '\($0)'" } ?? ""))"
        }
    }

    /// Number of distinct `rateLimitSlot`s.
    static let rateLimitSlots = 14

    /// For closings logged at the default level, which a client can cause many times over (one per
    /// connection it opens): the slot of their `RateLimitedCount` in the server; nil for the others.
    var rateLimitSlot: Int? {
        switch self {
        case .noRequestBeforeTimeout: return 0
        case .rejected: return 1
        case .outputLimitExceeded: return 2
        case .totalOutputLimitExceeded: return 3
        case .totalInputLimitExceeded: return 4
        case .tlsHandshakeFailed: return 5
        case .tlsHandshakeTimeout: return 6
        case .tlsOnPlainPort: return 7
        case .tlsError: return 8
        case .authenticationFailures: return 9
        case .notLoggedInBeforeTimeout: return 10
        case .httpRefused: return 11
        case let .webSocketClosed(code) where code != 1000 && code != 1001 && code != 1005: return 12
        case .idleTimeout: return 13
        default: return nil
        }
    }

    /// What closings in `slot` have in common, for the line that counts those not logged one by one.
    static func rateLimitSummary(slot: Int) -> String {
        switch slot {
        case 0: return "no complete request within the first-request timeout"
        case 1: return "rejected"
        case 2: return "output buffer limit exceeded"
        case 3: return "total output buffer limit exceeded"
        case 4: return "total input buffer limit exceeded"
        case 5: return "TLS handshake failed"
        case 6: return "TLS handshake timeout"
        case 7: return "TLS records on the plaintext port"
        case 8: return "TLS error"
        case 9: return "failed authentication attempts"
        case 10: return "not logged in within the login timeout"
        case 11: return "HTTP requests refused"
        case 13: return "nothing received within the idle timeout"
        default: return "WebSocket connections closed for a protocol error"
        }
    }

    /// Closings an operator should see at the default log level.
    var isNoteworthy: Bool {
        switch self {
        case .outputLimitExceeded, .totalOutputLimitExceeded, .totalInputLimitExceeded, .noRequestBeforeTimeout, .idleTimeout, .rejected,
             .tlsHandshakeFailed, .tlsHandshakeTimeout, .tlsOnPlainPort, .tlsError,
             .authenticationFailures, .notLoggedInBeforeTimeout, .httpRefused:
            return true
        case let .webSocketClosed(code):
            return code != 1000 && code != 1001 && code != 1005
        default: return false
        }
    }
}
