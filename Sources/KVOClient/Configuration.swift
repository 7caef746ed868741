extension KVOClient {
    /// Where and how a `KVOClient` connects: endpoint, TLS, credentials, reconnection, heartbeat and
    /// timeouts. A value; any thread.
    public struct Configuration: Sendable {
        /// Host name or numeric IPv4/IPv6 address of kvod.
        public var host: String
        /// kvod's port (its TLS port when `tls` is set).
        public var port: Int
        /// TLS options, or nil for plaintext.
        public var tls: TLSClientOptions?
        /// Sent as `auth` right after `hello` on every connection and reconnection; nil: none (open mode).
        public var credentials: Credentials?
        /// The name sent in `hello` (kvod logs it).
        public var clientName: String
        /// Reconnection after a lost connection; `nil` turns it off (then the client closes instead).
        public var reconnection: ReconnectionPolicy?
        /// After this many seconds without a byte from the server the client sends `ping` (well inside kvod's
        /// `--idle-timeout`, 60 s by default, which closes a connection that sends nothing). The client also answers
        /// kvod's heartbeat (`{"event":"heartbeat"}`) with a `ping`, so `.infinity` (off) still keeps a quiet
        /// connection open.
        public var heartbeatInterval: Double
        /// A `ping` after which nothing at all arrives for this many seconds means the connection is lost
        /// (half-open): the client reconnects and resumes (its session, its observations).
        public var heartbeatTimeout: Double
        /// A request unanswered for this many seconds fails with `KVODError.timedOut`; nil: no limit.
        public var requestTimeout: Double?
        /// Seconds allowed for the TCP connect and TLS handshake of one attempt.
        public var connectTimeout: Double
        /// Ask kvod for compact events (`hello` with `"events":"compact"`, docs/protocol.md "Compact
        /// events"): about 90 bytes fewer per event to send, read and parse. The changes delivered are the
        /// same either way; a server without compact events sends the full encoding, which is read as well.
        public var compactEvents: Bool

        /// A configuration with the defaults: plaintext, no credentials, reconnection on, a heartbeat after
        /// 10 s of silence answered within 10 s, requests failing after 30 s, compact events.
        public init(host: String = "127.0.0.1", port: Int = 7420, tls: TLSClientOptions? = nil,
                    credentials: Credentials? = nil, clientName: String = "KVOClient",
                    reconnection: ReconnectionPolicy? = ReconnectionPolicy(),
                    heartbeatInterval: Double = 10, heartbeatTimeout: Double = 10,
                    requestTimeout: Double? = 30, connectTimeout: Double = 10, compactEvents: Bool = true) {
            self.host = host
            self.port = port
            self.tls = tls
            self.credentials = credentials
            self.clientName = clientName
            self.reconnection = reconnection
            self.heartbeatInterval = heartbeatInterval
            self.heartbeatTimeout = heartbeatTimeout
            self.requestTimeout = requestTimeout
            self.connectTimeout = connectTimeout
            self.compactEvents = compactEvents
        }
    }

    /// How the client logs in (docs/protocol.md, "Users and authentication"). A value; any thread.
    public enum Credentials: Sendable {
        /// A user name and password (`auth` with `user` and `password`).
        case password(user: String, password: String)
        /// An API token (`auth` with `token`).
        case token(String)
    }

    /// Exponential backoff with jitter between reconnection attempts: the nominal delay starts at
    /// `initialDelay`, doubles after each failed attempt up to `maximumDelay`, and each wait is drawn
    /// uniformly from `[nominal × (1 − jitter), nominal]`, so that many clients cut off by the same restart
    /// do not all come back at once. Reconnection goes on until the client is closed.
    public struct ReconnectionPolicy: Sendable {
        /// The first wait, in seconds.
        public var initialDelay: Double
        /// The longest wait, in seconds.
        public var maximumDelay: Double
        /// The fraction of the nominal delay that is random (0: none, 1: anything from 0 to nominal).
        public var jitter: Double

        /// Defaults: 0.1 s doubling up to 5 s, half of each wait random.
        public init(initialDelay: Double = 0.1, maximumDelay: Double = 5, jitter: Double = 0.5) {
            self.initialDelay = initialDelay
            self.maximumDelay = maximumDelay
            self.jitter = min(max(jitter, 0), 1)
        }

        /// The wait before attempt `attempt` (1-based), in seconds.
        func delay(beforeAttempt attempt: Int) -> Double {
            let exponent = Double(min(max(attempt - 1, 0), 40))
            let nominal = min(initialDelay * Double(1 << Int(exponent)), maximumDelay)
            return Double.random(in: (nominal * (1 - jitter))...max(nominal, nominal * (1 - jitter)))
        }
    }
}
