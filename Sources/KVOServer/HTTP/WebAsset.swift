import KVOEngine
import KVOModel

/// One file kvod serves over HTTP from its own binary (see `WebAssets`). Immutable; any thread.
struct WebAsset: Sendable {
    /// The request path that answers with it (`/`, `/kvod.js`).
    let path: String
    /// The files under Sources/KVOServer/HTTP/Assets it was generated from: one, or the parts of one module
    /// (`/kvod.js`), joined as they are in this order.
    let fileNames: [String]
    /// Its `Content-Type`.
    let contentType: String
    /// Its bytes, UTF-8.
    let body: [UInt8]

    init(path: String, fileNames: [String], contentType: String, text: String) {
        self.path = path
        self.fileNames = fileNames
        self.contentType = contentType
        self.body = Array(text.utf8)
    }

    /// The asset served at `path`, if any.
    static func named(_ path: String) -> WebAsset? {
        WebAssets.all.first { $0.path == path }
    }

    /// The Content-Security-Policy of every asset response: the page loads its script, style and WebSocket
    /// from kvod itself and nothing else (no inline script, no other origin, no framing).
    static let contentSecurityPolicy =
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; " +
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}
