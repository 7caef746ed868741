import KVOEngine
import Logging

/// Everything a `Server` is started with. A value; any thread.
public struct ServerConfiguration: Sendable {
    /// Address to listen on (numeric or a name resolved once at startup).
    public var host = "127.0.0.1"
    /// Port; 0 picks a free one (read it back from `Server.port`).
    public var port = 7420
    /// Whether to listen for plaintext on `port` (`--port off` turns it off: then only `tls` listens).
    public var listensForPlaintext = true
    /// The TLS listener, beside the plaintext one (or alone); nil: no TLS.
    public var tls: TLSConfiguration? = nil
    /// The HTTP listener's settings (`--http-port`: WebSocket at `/ws`, `/metrics`, `/healthz`, `/readyz`);
    /// nil: no HTTP listener.
    public var http: HTTPConfiguration? = nil
    /// The Unix-domain socket listener (`--unix PATH`, JSON lines), beside the others or alone; nil: none.
    public var unixSocket: UnixSocketConfiguration? = nil
    /// Longest request line, in bytes (without the newline). Longer lines get `too_large`.
    public var maximumLineLength = 1 << 20
    /// Most output bytes queued for one connection before it is closed as too slow.
    public var maximumOutputBufferBytes = 32 << 20
    /// Most output bytes queued on all connections together (output chunks held); past it the
    /// connections with the most queued are closed first until the rest fit.
    public var maximumTotalOutputBytes = 1 << 30
    /// Most bytes held for unfinished request lines on all connections together; past it the
    /// connection holding the largest is closed, until the rest fit.
    public var maximumTotalInputBytes = 256 << 20
    /// Seconds a new connection may take to send its first complete request before it is closed;
    /// 0 waits for ever.
    public var firstRequestTimeout: Double = 30
    /// Seconds a connection may send nothing at all (no request, no answer to a heartbeat, no WebSocket pong, not
    /// a byte) before it is closed; quiet for half of it, it gets a heartbeat (`IdleSweep`). 0: never (`--idle-timeout`).
    public var idleTimeout: Double = ServerConfiguration.defaultIdleTimeout
    /// The default of `idleTimeout`: a minute, well above the clients' pings (every 10 s from KVOClient, 15 s from
    /// kvod.js and `kvoclient subscribe`).
    public static let defaultIdleTimeout: Double = 60
    /// With users defined: seconds a new connection may take to log in (`auth`, or a client certificate)
    /// before it is closed; 0 waits for ever (`--login-timeout`).
    public var loginTimeout: Double = 60
    /// Most simultaneous connections; further ones are told `too_many_connections` and closed.
    public var maximumConnections = 10_000
    /// Most observations one connection may hold; `observe` past it is `too_many_observations`.
    public var maximumObservationsPerConnection = KVOEngine.defaultMaximumObservationsPerConnection
    /// Most replies one connection may have queued and not yet written to its socket; with that many,
    /// the server stops reading the connection until they drain (back-pressure, never a close).
    public var maximumPendingRequests = ServerConfiguration.defaultMaximumPendingRequests
    /// Milliseconds of the loop's time (fractions allowed) from which a request's handling, or a loop iteration's
    /// work, is kept in the slow-request log (`--slow-request`, `SlowLog`); 0 keeps every request.
    public var slowRequestMilliseconds: Double = ServerConfiguration.defaultSlowRequestMilliseconds
    /// The default of `slowRequestMilliseconds` (Redis's `slowlog-log-slower-than` is 10 ms too).
    public static let defaultSlowRequestMilliseconds: Double = 10
    /// `slowRequestMilliseconds` in nanoseconds (at most about 31 years, so that a sum with a time cannot overflow).
    var slowRequestNanoseconds: UInt64 { UInt64(min(max(slowRequestMilliseconds, 0), 1e12) * 1e6) }
    /// The default of `maximumPendingRequests`.
    public static let defaultMaximumPendingRequests = 4096
    /// Largest value of one write and largest object, as compact JSON (`too_large` beyond). The object
    /// limit must let an event with an object's old and new value fit `maximumOutputBufferBytes`
    /// (`StoredSizeLimits.problem`); `Server.init` refuses a configuration where it does not. Whoever
    /// changes the output buffer sets these too (`StoredSizeLimits.defaults(outputBufferBytes:)`).
    public var sizeLimits = StoredSizeLimits()
    /// Where and how to persist; nil keeps everything in memory (`--in-memory`).
    public var storage: StorageConfiguration? = nil
    /// Most revisions of history kept for `observe` with `sinceRev`.
    public var historyLimit = KVOEngine.defaultHistoryLimit
    /// Most (estimated) bytes of history kept.
    public var historyByteLimit = KVOEngine.defaultHistoryByteLimit
    /// With `storage` nil (`--in-memory`): the users file (`--users`), read at start-up and written
    /// by online user changes. A missing file is no users.
    public var usersFile: String? = nil
    /// Serve without authentication on a non-loopback address when no users are defined
    /// (`--insecure-open`); without it such a start is refused (docs/protocol.md, "Open and protected mode").
    public var allowsInsecureOpen = false
    /// Password checks (Argon2id) running on the libuv thread pool at once.
    public var passwordCheckConcurrency = 2
    /// Password checks waiting for a free slot at most; past it the one whose connection and address
    /// have failed most is answered `unauthenticated` without a check.
    public var passwordCheckQueueLimit = 256
    /// Failed `auth` requests after which a connection is closed.
    public var maximumAuthenticationFailures = 5
    /// Cluster mode (`--cluster`): writes go through a NATS JetStream stream that every node applies;
    /// nil: a single node (docs/design.md, "Cluster").
    public var cluster: ClusterConfiguration? = nil
    /// Stop on SIGINT and SIGTERM, reload on SIGHUP (the daemon does; tests running a server in-process do not).
    public var handlesSignals = false
    /// SIGHUP: reads the configuration again (kvod's config file and environment under its command line) and
    /// returns it, or throws, with a message for the log, to keep the running one. The server then takes
    /// from it only what can change while it runs (`Server.applyLiveSettings(from:)`). Called on the loop
    /// thread. nil: SIGHUP reloads only the TLS files and the users file.
    public var reload: (@Sendable () throws -> ServerConfiguration)? = nil
    /// Every setting of the daemon's in force and where it came from, for the `config` operation (`SettingInForce`):
    /// set by the daemon at start-up, and in the configuration a reload returns. Empty without the daemon.
    public var settingsInForce: [SettingInForce] = []
    public var logger = Logger(label: "kvod")
    /// The git commit this build is from, for `kvod_build_info{commit}` and the first "listening" log line: the
    /// daemon passes `KVODBuildCommit.hash` (generated at build time); "unknown" when not told.
    public var buildCommit = "unknown"
    /// The clock every time-based behaviour reads (`ServerClock`); nil: the system clock (kvod's). Tests running a
    /// server in-process give `ServerClock.manual()` and turn it with `Server.advanceTime(by:)`.
    public var clock: ServerClock? = nil
    /// Tests: the server needs no listener, its connections being made in-process (`EmbeddedConnection`).
    var isEmbedded = false

    public init() {}
}

/// The Unix-domain socket listener's settings (`--unix`, `--unix-mode`). A value; any thread.
public struct UnixSocketConfiguration: Sendable {
    /// Where the socket file goes (at most 107 bytes). A stale socket file there (nothing listening) is
    /// replaced; a live one is refused. The file is removed when the server stops cleanly.
    public var path: String
    /// The file's permission bits (0o600: only the server's user may connect).
    public var mode: UInt32

    public init(path: String, mode: UInt32 = 0o600) {
        self.path = path
        self.mode = mode
    }
}
