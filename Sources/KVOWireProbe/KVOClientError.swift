import enum KVOClient.TLSSessionError

/// What can go wrong talking to kvod.
public enum KVOClientError: Error, Equatable, CustomStringConvertible {
    /// Nothing listens at host:port (ECONNREFUSED), or the host did not resolve.
    case cannotConnect(host: String, port: Int, reason: String)
    /// The server closed the connection.
    case connectionClosed
    /// No complete message arrived in time.
    case timedOut
    /// A socket call failed.
    case io(String)
    /// The server sent a line that is not a JSON object.
    case malformedMessage(String)
    /// The server answered `ok: false`.
    case server(code: String, message: String)
    /// TLS failed: a certificate or key could not be loaded, the handshake failed (the server's certificate
    /// was not accepted, or the server refused ours), or a record was bad.
    case tls(String)

    public var description: String {
        switch self {
        case let .cannotConnect(host, port, reason): return "cannot connect to \(host):\(port): \(reason)"
        case .connectionClosed: return "the server closed the connection"
        case .timedOut: return "timed out waiting for the server"
        case let .io(reason): return "socket error: \(reason)"
        case let .malformedMessage(line): return "malformed message from the server: \(line)"
        case let .server(code, message): return "\(code): \(message)"
        case let .tls(reason): return "TLS: \(reason)"
        }
    }
}

extension KVOClientError {
    /// The shared TLS session's failure as this client's error.
    init(_ failure: TLSSessionError) {
        switch failure {
        case .closed: self = .connectionClosed
        case let .io(reason): self = .io(reason)
        case let .tls(reason): self = .tls(reason)
        }
    }
}
