/// What a connection speaks, as the `transport` label of the connection metrics names it. A value; any thread.
enum ConnectionKind: Int, CaseIterable {
    /// JSON lines over plain TCP (`--port`).
    case tcp
    /// JSON lines over TLS (`--tls-port`).
    case tls
    /// HTTP requests on `--http-port` (metrics, health), not upgraded.
    case http
    /// JSON messages in WebSocket frames (`--http-port`, `GET /ws`): an HTTP connection that upgraded.
    case webSocket
    /// JSON lines on the Unix-domain socket (`--unix`).
    case unix

    var label: String {
        switch self {
        case .tcp: "tcp"
        case .tls: "tls"
        case .http: "http"
        case .webSocket: "websocket"
        case .unix: "unix"
        }
    }
}
