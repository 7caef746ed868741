import KVOEngine
import KVOModel

/// The HTTP listener's settings (`--http-port`, `--http-host`, `--http-allowed-origin`, `--http-allowed-host`).
/// A value; any thread. The Host and Origin rules they feed are `HTTPHostCheck`'s.
public struct HTTPConfiguration: Sendable {
    /// The port (0: an ephemeral one, printed at start-up).
    public var port: Int
    /// The address to bind: loopback unless told otherwise. On another address with users defined,
    /// `/metrics` needs a server admin's API token (`HTTPMetricsAccess`).
    public var host: String
    /// The `Origin` values a browser's WebSocket upgrade may carry (exact, e.g. "https://app.example.com");
    /// "*" allows every origin. A request with no `Origin` header (not a browser) is always allowed.
    public var allowedOrigins: [String]
    /// Host names (besides IP literals and "localhost") a request's `Host` may name, e.g. "kvod.example.com":
    /// any other name is refused, against DNS rebinding.
    public var allowedHosts: [String]
    /// Whether the listener speaks TLS (https, wss) with the TLS listener's certificate and settings
    /// (`--http-tls`; needs `ServerConfiguration.tls`).
    public var usesTLS: Bool

    public init(port: Int, host: String = "127.0.0.1", allowedOrigins: [String] = [], allowedHosts: [String] = [],
                usesTLS: Bool = false) {
        self.port = port
        self.host = host
        self.allowedOrigins = allowedOrigins
        self.allowedHosts = allowedHosts
        self.usesTLS = usesTLS
    }

    /// Whether `name` can be given to `--http-allowed-host`: a host name (not an address, no port).
    public static func isValidAllowedHost(_ name: String) -> Bool { HTTPAuthority.allowedName(name) != nil }
}
