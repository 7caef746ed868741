import KVOJSON

/// What a `KVOClient` call can fail with: the server's answer (`server`), or the connection's state.
/// A value; any thread. `CustomStringConvertible` gives one line for people.
public enum KVODError: Error, Sendable, CustomStringConvertible {
    /// The server answered `ok: false`: nothing changed. `code` is the protocol's error code, `message`
    /// its text for people, `details` the error's other members (`property`, `rule`, `limit`, ...).
    case server(code: Code, message: String, details: Details)
    /// The connection was lost while this request was in flight. `wasWrite` says whether the request
    /// could change state (create, set, insert, ... , bind): such a request may or may not have been
    /// applied and is never retried by the client. Reads fail the same way (retry them freely).
    case connectionLost(operation: String, wasWrite: Bool, reason: String)
    /// The first connection could not be made (`KVOClient.connect`), or the host did not resolve.
    case cannotConnect(host: String, port: Int, reason: String)
    /// TLS failed: a certificate could not be loaded, the handshake failed or a record was bad.
    case tls(String)
    /// No reply within the configuration's `requestTimeout`. A write may still be applied.
    case timedOut(operation: String)
    /// The client was closed (by `close()`), or reconnection is off and the connection was lost.
    case closed
    /// The server sent something this client does not understand (the text is escaped and shortened).
    case malformedReply(String)
    /// A value could not be encoded to JSON, or a reply decoded to the type asked for.
    case coding(String)
    /// An observation with `ObservationBuffering.endingWhenFull(limit:)` had `limit` unread changes when
    /// another arrived: it was ended (`unobserve`) after the changes buffered. `resumeFrom` is the `rev` of
    /// the last of them (nil if none had a revision yet): `subscribe(..., sinceRev: resumeFrom)` goes on
    /// from there, with nothing missed while kvod's history reaches back.
    case bufferFull(limit: Int, object: String, keyPath: String, resumeFrom: Int64?)
    /// The request needs a protocol feature the server did not announce in `hello`'s `features` (a server
    /// refuses a field it does not know): it was not sent. `KVOClient.serverFeatures` lists what the server takes.
    case notAnnounced(feature: String, operation: String)

    /// The protocol's error codes (docs/protocol.md, "Requests and replies"); `other` for a code this
    /// client does not know.
    public enum Code: Sendable, Hashable, CustomStringConvertible {
        /// `bad_request`: a malformed request.
        case badRequest
        /// `unknown_op`: no such operation.
        case unknownOp
        /// `not_found`: the object (or an intermediate key) does not exist.
        case notFound
        /// `exists`: `create` of an object that exists.
        case exists
        /// `type_mismatch`: a key path through a value that is not an object, or not an array.
        case typeMismatch
        /// `out_of_range`: an array index outside the array.
        case outOfRange
        /// `too_large`: a line, reply, value, object or nesting over a limit (`Details.limit`).
        case tooLarge
        /// `too_many_connections`: the server is full.
        case tooManyConnections
        /// `too_many_observations`: the connection holds its maximum (`Details.limit`).
        case tooManyObservations
        /// `invalid_value`: refused by the object's class (`Details.property`, `Details.rule`).
        case invalidValue
        /// `read_only`: a computed property or `$class` (`Details.property`).
        case readOnly
        /// `cycle`: a binding or computed properties that would trigger themselves.
        case cycle
        /// `unauthenticated`: log in first, or wrong credentials.
        case unauthenticated
        /// `forbidden`: the user lacks a permission (`Details.object`, `Details.permission`).
        case forbidden
        /// `invalid_expression`: an expression that does not parse (`Details.column`, `property`/`field`).
        case invalidExpression
        /// `quota_exceeded`: the store's memory quota (`Details.limit`, `Details.used`).
        case quotaExceeded
        /// `storage_full`: the server's disk (or `--max-disk`) is full; writes are refused until space
        /// returns, reads and observations keep working. Retry later.
        case storageFull
        /// `storage_unavailable`: the server cannot store writes (its data files were lost, or its store
        /// failed); reads and observations keep working.
        case storageUnavailable
        /// `conflict`: a conditional write's condition did not hold, nothing was written
        /// (`Details.condition`, `Details.value`, `Details.exists`, `Details.rev`); see `WriteCondition`.
        case conflict
        /// `closed`: a server admin closed this connection (`kill`); sent once, without an id, before the close.
        case closed
        /// `rate_limited`: more `signal`s than the connection's rate (`Details.limit`; `retryAfter` in milliseconds).
        case rateLimited
        /// A code this client does not know, as sent.
        case other(String)

        private static let byName: [String: Code] = [
            "bad_request": .badRequest, "unknown_op": .unknownOp, "not_found": .notFound, "exists": .exists,
            "type_mismatch": .typeMismatch, "out_of_range": .outOfRange, "too_large": .tooLarge,
            "too_many_connections": .tooManyConnections, "too_many_observations": .tooManyObservations,
            "invalid_value": .invalidValue, "read_only": .readOnly, "cycle": .cycle,
            "unauthenticated": .unauthenticated, "forbidden": .forbidden,
            "invalid_expression": .invalidExpression, "quota_exceeded": .quotaExceeded,
            "storage_full": .storageFull, "storage_unavailable": .storageUnavailable, "conflict": .conflict,
            "closed": .closed, "rate_limited": .rateLimited,
        ]

        /// The code named `name` on the wire (`not_found` is `.notFound`).
        public init(wireName name: String) {
            self = Code.byName[name] ?? .other(name)
        }

        /// The name on the wire.
        public var wireName: String {
            if case let .other(name) = self { return name }
            return Code.byName.first { $0.value == self }!.key
        }

        /// The name on the wire.
        public var description: String { wireName }
    }

    /// The members of a server error besides `code` and `message`, with accessors for those the protocol
    /// documents. A value; any thread.
    public struct Details: Sendable, Equatable {
        /// Every member of the error object but `code` and `message`, as sent.
        public let fields: [String: JSONValue]

        /// Makes details from an error object's other members.
        public init(_ fields: [String: JSONValue] = [:]) { self.fields = fields }

        /// `invalid_value`, `read_only`, `invalid_expression`: the property concerned.
        public var property: String? { fields["property"]?.stringValue }
        /// `invalid_value`: the class rule the value broke.
        public var rule: String? { fields["rule"]?.stringValue }
        /// `too_large`, `too_many_observations`, `quota_exceeded`: the limit in force.
        public var limit: Int64? { fields["limit"]?.intValue }
        /// `quota_exceeded`: what is stored now.
        public var used: Int64? { fields["used"]?.intValue }
        /// `forbidden`: the object the user lacks a permission on.
        public var object: String? { fields["object"]?.stringValue }
        /// `forbidden`: the permission lacking (`read`, `write`, `admin`).
        public var permission: String? { fields["permission"]?.stringValue }
        /// `invalid_expression`: the 1-based column of the problem.
        public var column: Int64? { fields["column"]?.intValue }
        /// `invalid_expression`: the binding field concerned.
        public var field: String? { fields["field"]?.stringValue }
        /// `conflict`: the condition that did not hold (`ifExists`, `ifAbsent`, `ifEquals`).
        public var condition: String? { fields["condition"]?.stringValue }
        /// `conflict` of `ifEquals`: the value at its key path now (`.null` for a missing key); nil, with
        /// `valueTooLarge`, when it would not fit in the reply.
        public var value: JSONValue? { fields["value"] }
        /// `conflict` of `ifEquals`: the current value was left out of the reply, being too large for it.
        public var valueTooLarge: Bool { fields["valueTooLarge"]?.boolValue ?? false }
        /// `conflict` of `ifExists`/`ifAbsent` (or of `ifEquals` on a missing object): whether the object exists.
        public var exists: Bool? { fields["exists"]?.boolValue }
        /// `conflict` of `ifRev`: the revision of the object's last change.
        public var changedRev: Int64? { fields["changedRev"]?.intValue }
        /// A refused `batch`: the index of the part refused (the rest of the details are that part's error's).
        public var part: Int? { fields["part"]?.intValue.map(Int.init) }
        /// `conflict`: the server's revision when the condition was checked.
        public var rev: Int64? { fields["rev"]?.intValue }
    }

    /// The server error's code, or nil for other failures.
    public var code: Code? {
        if case let .server(code, _, _) = self { return code }
        return nil
    }

    /// One line for people (server messages escaped).
    public var description: String {
        switch self {
        case let .server(code, message, _): return "\(code): \(PrintableText.escaped(message, limit: 2048))"
        case let .connectionLost(operation, wasWrite, reason):
            return wasWrite
                ? "the connection was lost during '\(operation)' (\(reason)): the write may or may not have been applied; it was not retried"
                : "the connection was lost during '\(operation)' (\(reason))"
        case let .cannotConnect(host, port, reason): return "cannot connect to \(host):\(port): \(reason)"
        case let .tls(reason): return "TLS: \(reason)"
        case let .timedOut(operation): return "no reply to '\(operation)' in time"
        case .closed: return "the client is closed"
        case let .malformedReply(text): return "malformed message from the server: \(text)"
        case let .coding(reason): return reason
        case let .bufferFull(limit, object, keyPath, resumeFrom):
            let resume = resumeFrom.map { ", resume with sinceRev \($0)" } ?? ""
            return "the observation of '\(PrintableText.escaped(keyPath, limit: 256))' on '\(PrintableText.escaped(object, limit: 256))' had \(limit) unread changes and was ended\(resume)"
        case let .notAnnounced(feature, operation):
            return "the server does not announce the protocol feature '\(feature)' (hello's features): '\(operation)' was not sent"
        }
    }

    /// An `ok: false` reply's error object as an error.
    static func fromReply(_ error: JSONValue?) -> KVODError {
        guard case var .object(fields)? = error else {
            return .malformedReply("an error reply without an error object")
        }
        let code = fields.removeValue(forKey: "code")?.stringValue ?? "unknown"
        let message = fields.removeValue(forKey: "message")?.stringValue ?? ""
        return .server(code: Code(wireName: code), message: message, details: Details(fields))
    }
}
