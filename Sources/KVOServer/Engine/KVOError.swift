import KVOJSON

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
        case invalidValue = "invalid_value"
        case readOnly = "read_only"
        case cycle = "cycle"
        case invalidExpression = "invalid_expression"
    }

    public let code: Code
    public let message: String
    /// Machine-readable particulars written into the error object beside `code` and `message`
    /// (`property` and `rule` for `invalid_value`, `column` for `invalid_expression`). Usually empty.
    public let details: [String: JSONValue]

    public init(_ code: Code, _ message: String, details: [String: JSONValue] = [:]) {
        self.code = code
        self.message = message
        self.details = details
    }
}
