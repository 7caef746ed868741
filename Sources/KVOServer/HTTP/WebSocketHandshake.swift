import COpenSSL
import KVOEngine
import KVOModel

/// The server's side of the RFC 6455 opening handshake: checks an upgrade request and computes
/// `Sec-WebSocket-Accept`. Stateless; any thread.
enum WebSocketHandshake {
    /// The GUID RFC 6455 appends to the client's key.
    static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    /// Why an upgrade request is refused, with the HTTP status to answer.
    struct Refusal: Error {
        let status: HTTPStatus
        let reason: String
    }

    /// The accept value for a valid upgrade request, or why it is not one (RFC 6455 section 4.2.1).
    static func accept(_ request: HTTPRequestHead) -> Result<String, Refusal> {
        guard request.method == "GET" else {
            return .failure(Refusal(status: .methodNotAllowed, reason: "a WebSocket upgrade must be a GET"))
        }
        guard request.minorVersion >= 1 else {
            return .failure(Refusal(status: .badRequest, reason: "a WebSocket upgrade needs HTTP/1.1"))
        }
        guard request.header("upgrade", containsToken: "websocket"), request.header("connection", containsToken: "upgrade") else {
            return .failure(Refusal(status: .upgradeRequired, reason: "this endpoint speaks WebSocket only (Upgrade: websocket)"))
        }
        guard request.headers["sec-websocket-version"]?.split(separator: ",").contains(where: { $0.trimmingSpaces == "13" }) == true else {
            return .failure(Refusal(status: .upgradeRequired, reason: "WebSocket version 13 only"))
        }
        guard let key = request.headers["sec-websocket-key"].map({ Substring($0).trimmingSpaces }),
              key.utf8.count == 24, key.hasSuffix("==")
        else {
            return .failure(Refusal(status: .badRequest, reason: "missing or malformed Sec-WebSocket-Key"))
        }
        return .success(acceptValue(forKey: String(key)))
    }

    /// base64(SHA-1(key + GUID)). The RFC's example key "dGhlIHNhbXBsZSBub25jZQ==" gives
    /// "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=".
    static func acceptValue(forKey key: String) -> String {
        let input = Array((key + guid).utf8)
        var digest = [UInt8](repeating: 0, count: 20)
        var digestLength: UInt32 = 0
        _ = EVP_Digest(input, input.count, &digest, &digestLength, EVP_sha1(), nil)
        var encoded = [UInt8](repeating: 0, count: 32)
        let length = EVP_EncodeBlock(&encoded, digest, Int32(digestLength))
        return String(decoding: encoded.prefix(Int(length)), as: UTF8.self)
    }
}
