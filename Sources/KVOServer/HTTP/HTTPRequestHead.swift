import KVOEngine
import KVOModel

/// One HTTP/1.1 request as the HTTP listener needs it: method, path, and the few headers it acts on.
/// Headers it does not use are counted against the limits but not kept. A value; loop thread.
struct HTTPRequestHead {
    /// "GET", "POST", ... (http-parser's name for the method).
    var method: String
    /// The request target's path, without the query ("/ws"); the raw target when it has no path.
    var path: String
    /// The query after `?`, when there is one.
    var query: String?
    /// HTTP/1.x minor version.
    var minorVersion: Int
    /// Whether the connection stays open after the response (HTTP/1.1 without `Connection: close`).
    var keepAlive: Bool
    /// Whether the request asks to switch protocols (`Connection: upgrade` with an `Upgrade` header).
    var isUpgrade: Bool
    /// The headers kvod acts on, by lower-case name (`HTTPRequestHead.keptHeaders`); a repeated header's
    /// values joined with ", " as RFC 9110 allows for list-valued fields.
    var headers: [String: String] = [:]
    /// The request's body: only the HTTP API's requests (`/v1/…`) may have one, of at most
    /// `HTTPRequestParser.Limits.bodyBytes`; empty otherwise.
    var body: [UInt8] = []

    /// The header names kept. `authorization` may hold an API token (`/metrics`): never log these values.
    static let keptHeaders: Set<String> = [
        "host", "origin", "upgrade", "connection", "sec-websocket-key", "sec-websocket-version",
        "sec-websocket-protocol", "accept-encoding", "authorization",
        "accept", "content-type", "if-match", "if-none-match", "last-event-id",
    ]

    /// Whether `header`'s comma-separated list contains `token` (case-insensitive), e.g.
    /// `Connection: keep-alive, Upgrade` contains "upgrade".
    func header(_ name: String, containsToken token: String) -> Bool {
        guard let value = headers[name] else { return false }
        return value.split(separator: ",").contains { $0.trimmingSpaces.lowercased() == token }
    }
}

extension Substring {
    /// Without leading and trailing spaces and tabs.
    var trimmingSpaces: Substring {
        var result = self
        while let first = result.first, first == " " || first == "\t" { result.removeFirst() }
        while let last = result.last, last == " " || last == "\t" { result.removeLast() }
        return result
    }
}
