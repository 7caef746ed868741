/// The HTTP listener's settings (`--http-port`, `--http-host`, `--http-allowed-origin`). A value; any thread.
public struct HTTPConfiguration: Sendable {
    /// The port (0: an ephemeral one, printed at start-up).
    public var port: Int
    /// The address to bind: loopback unless told otherwise, since `/metrics` answers anyone who can connect.
    public var host: String
    /// The `Origin` values a browser's WebSocket upgrade may carry (exact, e.g. "https://app.example.com");
    /// "*" allows every origin. A request with no `Origin` header (not a browser) is always allowed.
    public var allowedOrigins: [String]
    /// Whether the listener speaks TLS (https, wss) with the TLS listener's certificate and settings
    /// (`--http-tls`; needs `ServerConfiguration.tls`).
    public var usesTLS: Bool

    public init(port: Int, host: String = "127.0.0.1", allowedOrigins: [String] = [], usesTLS: Bool = false) {
        self.port = port
        self.host = host
        self.allowedOrigins = allowedOrigins
        self.usesTLS = usesTLS
    }

    /// Whether a request carrying `origin` may upgrade. The listener's own origin (`http://HOST` from the
    /// request's `Host` header: a page kvod served itself) is always allowed.
    func allows(origin: String?, host: String?) -> Bool {
        guard let origin else { return true }
        if allowedOrigins.contains("*") || allowedOrigins.contains(origin) { return true }
        if let host, origin == "http://\(host)" || origin == "https://\(host)" { return true }
        return false
    }
}
