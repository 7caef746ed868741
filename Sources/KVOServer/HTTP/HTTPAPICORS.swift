import KVOEngine
import KVOModel

/// CORS for the HTTP API: a page of another origin that `--http-allowed-origin` lists may call `/v1/` (the Origin rule,
/// `HTTPHostCheck.allows`, has let it through): its responses carry `Access-Control-Allow-Origin` with its origin (and
/// `Vary: Origin`), and its preflight (`OPTIONS`) is answered with the methods and headers the API takes. No
/// credentials mode: the API authenticates with `Authorization`, never cookies. Stateless; any thread.
enum HTTPAPICORS {
    /// The headers for a request from `origin` (nil: not a browser, or the Origin rule failed before this).
    static func headers(origin: String?, host: HTTPAuthority?, hostCheck: HTTPHostCheck) -> [(String, String)] {
        guard let origin, hostCheck.allows(origin: origin, host: host) else { return [] }
        return [("Access-Control-Allow-Origin", origin), ("Vary", "Origin"),
                ("Access-Control-Expose-Headers", "ETag, Kvod-Rev, Kvod-Expires-At")]
    }

    /// What a preflight is told the API takes.
    static let preflightHeaders: [(String, String)] = [
        ("Access-Control-Allow-Methods", "GET, HEAD, POST, PUT, DELETE"),
        ("Access-Control-Allow-Headers", "Authorization, Content-Type, If-Match, If-None-Match, Last-Event-ID"),
        ("Access-Control-Max-Age", "600"),
        ("Allow", "GET, HEAD, POST, PUT, DELETE, OPTIONS"),
    ]
}
