/// A request that failed, with the protocol's error code and a message for people.
///
/// Produced by the engine (state errors) and the protocol decoder (malformed requests); a failed
/// request never changes state.
public struct KVOError: Error, Equatable, Sendable {
    /// The wire error codes (docs/protocol.md).
    public enum Code: String, Sendable {
        case badRequest = "bad_request"
        case unknownOp = "unknown_op"
        case notFound = "not_found"
        case exists = "exists"
        case typeMismatch = "type_mismatch"
        case tooLarge = "too_large"
        case outOfRange = "out_of_range"
        case tooManyConnections = "too_many_connections"
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }
}
