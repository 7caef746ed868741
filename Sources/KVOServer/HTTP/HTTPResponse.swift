import KVOEngine
import KVOModel

/// Writes the HTTP/1.1 responses of kvod's HTTP listener: a status line, a few headers, and a body
/// with its `Content-Length`. Stateless; any thread.
enum HTTPResponse {
    /// A complete response. `keepAlive` false adds `Connection: close`.
    static func make(_ status: HTTPStatus, contentType: String = "text/plain; charset=utf-8", body: [UInt8],
                     keepAlive: Bool, extraHeaders: [(String, String)] = []) -> [UInt8] {
        var text = "HTTP/1.1 \(status.rawValue) \(status.reasonPhrase)\r\n"
        text += "Content-Type: \(contentType)\r\nContent-Length: \(body.count)\r\n"
        text += "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
        for (name, value) in extraHeaders { text += "\(name): \(value)\r\n" }
        if !keepAlive { text += "Connection: close\r\n" }
        text += "\r\n"
        return Array(text.utf8) + body
    }

    /// `response` without its body, for a HEAD request (its `Content-Length` still says how long the body is).
    static func headOnly(_ response: [UInt8]) -> [UInt8] {
        let end: [UInt8] = [0x0D, 0x0A, 0x0D, 0x0A]
        guard let range = response.firstRange(of: end) else { return response }
        return Array(response[..<range.upperBound])
    }

    /// A plain-text answer (an error's reason, "ok").
    static func text(_ status: HTTPStatus, _ message: String, keepAlive: Bool,
                     extraHeaders: [(String, String)] = []) -> [UInt8] {
        make(status, body: Array((message + "\n").utf8), keepAlive: keepAlive, extraHeaders: extraHeaders)
    }

    /// The 101 answer to a WebSocket upgrade (RFC 6455 section 4.2.2).
    static func switchingToWebSocket(accept: String) -> [UInt8] {
        Array("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: \(accept)\r\n\r\n".utf8)
    }
}
