import KVOJSON

/// A request that failed, with the protocol's error code and a message for people.
///
/// Produced by the engine (state errors) and the protocol decoder (malformed requests); a failed
/// request never changes state.
public struct KVOError: Error, Equatable, Sendable {
    /// The wire error codes (docs/protocol.md).
    public enum Code: String, Sendable, CaseIterable {
        case badRequest = "bad_request"
        case unknownOp = "unknown_op"
        case notFound = "not_found"
        case exists = "exists"
        case typeMismatch = "type_mismatch"
        case tooLarge = "too_large"
        case outOfRange = "out_of_range"
        case tooManyConnections = "too_many_connections"
        case tooManyObservations = "too_many_observations"
        case invalidValue = "invalid_value"
        case readOnly = "read_only"
        case cycle = "cycle"
        case invalidExpression = "invalid_expression"
        /// The connection has not authenticated, or its credentials were wrong.
        case unauthenticated = "unauthenticated"
        /// The connection's user lacks the permission the request needs.
        case forbidden = "forbidden"
        /// A write would take the stored data past `--max-memory`.
        case quotaExceeded = "quota_exceeded"
        /// Cluster mode: the write's batch was not appended to the stream and applied before the
        /// deadline (`--cluster-write-timeout`); the message says whether it may still be applied.
        case unavailable = "unavailable"
        /// Cluster mode: an operation the cluster does not replicate yet (user management).
        case unsupported = "unsupported"
        /// The store ran out of space (the disk, or `--max-disk`): writes are refused until a commit can
        /// succeed again; reads, observations and resumes keep working.
        case storageFull = "storage_full"
        /// The store cannot take writes for another reason (its files were deleted or replaced, or it
        /// failed in a way that left it consistent): writes are refused; reads keep working.
        case storageUnavailable = "storage_unavailable"
        /// A conditional write's condition (`ifExists`, `ifAbsent`, `ifEquals`) did not hold when it would have
        /// applied: nothing was written. `details` say which condition, the current revision and, for
        /// `ifEquals`, the current value.
        case conflict = "conflict"
        /// Sent once, without `id`, to a connection a server admin closes (`kill`), just before the server closes it.
        case closed = "closed"
        /// A connection sent more `signal`s than its rate allows (docs/protocol.md, "Signals"): this one was not
        /// sent. `details` have `limit` (signals a second) and `retryAfter` (milliseconds until one may go).
        case rateLimited = "rate_limited"
    }

    public let code: Code
    public let message: String
    /// Machine-readable particulars written into the error object beside `code` and `message`
    /// (`property` and `rule` for `invalid_value`, `column` for `invalid_expression`). Usually empty.
    public let details: [String: JSONValue]

    /// Longest message kept, in bytes. Messages quote client text (ids, key paths, values); a longer
    /// one keeps its first `PrintableText.defaultLimit` characters and states its full length, so no
    /// reply, binding event or log line repeats a megabyte a client sent.
    public static let maximumMessageLength = 2048

    public init(_ code: Code, _ message: String, details: [String: JSONValue] = [:]) {
        self.code = code
        self.message = message.utf8.count <= KVOError.maximumMessageLength ? message : KVOError.shortened(message)
        self.details = details
    }

    /// `message` cut after `PrintableText.defaultLimit` characters, with its length in bytes.
    private static func shortened(_ message: String) -> String {
        String(message.unicodeScalars.prefix(PrintableText.defaultLimit)) + "…(\(message.utf8.count) bytes)"
    }
}
