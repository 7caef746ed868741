import KVOModel

/// What each new connection must have done by when, one queue per kind: sent its first request
/// (`--first-request-timeout`; a keep-alive HTTP connection, each next one), logged in when users are defined
/// (`--login-timeout`), finished its TLS handshake (`--tls-handshake-timeout`). The housekeeping tick closes the
/// connections past a deadline that have not done it (`Server.closeConnectionsPastDeadlines`).
///
/// Owned by `Server` (a value stored in it); loop thread only.
struct ConnectionDeadlines {
    var firstRequest = DeadlineQueue()
    var login = DeadlineQueue()
    var tlsHandshake = DeadlineQueue()

    /// The deadline `seconds` after `now` (milliseconds, `ServerClock.milliseconds`).
    static func deadline(_ seconds: Double, after now: UInt64) -> UInt64 {
        now &+ UInt64(seconds * 1000)
    }
}
