import KVOEngine
import KVOJSON
import KVOModel

/// Turns one request line into a `Request`, or into the error its reply must carry.
///
/// Stateless; any thread. A member the operation's row does not declare (`OperationDeclaration.fields`), a
/// `null` where the row takes none, missing or mistyped fields, unknown options and malformed key paths are
/// `bad_request`, an unknown `op` is `unknown_op`. The server refuses what it does not know; a client learns what
/// it accepts from `hello`'s `features` (docs/protocol.md, "Requests and replies").
package enum RequestDecoder {
    /// Longest object id accepted, in bytes.
    package static let maximumObjectIDLength = ObjectID.maximumLength

    /// The request fields every line repeats: parsed as these strings, not built again for each line, each with its
    /// `RequestField` (`MemberText.keyIndex`).
    private static let fieldNames = RequestField.keys

    /// The outcome of decoding one line: the `id` to echo (nil when absent or unreadable) and the
    /// request or its error.
    package struct Decoded {
        package let id: JSONValue?
        package let request: Result<Request, KVOError>
        /// `atLeastRev` of a `get`, `list`, `info` or `observe`: the revision the server must have reached
        /// before it answers (read-your-writes across cluster nodes; docs/protocol.md, "Cluster"); nil when absent.
        package var atLeastRev: UInt64? = nil

        /// A `set`'s value exactly as `JSONWriter` encodes it (`HeldValue.text`): the request's bytes when it carried
        /// it in that form, else `JSONCanonicalizer`'s; nil in the rare cases the canonicalizer leaves to the tree.
        package var valueText: [UInt8]? {
            guard case let .success(.set(_, _, value)) = request else { return nil }
            return value.text?.bytes
        }
    }

    /// Decodes a line (without its newline). The line is checked whole (`JSONParser.scanMembers`, as strict
    /// as parsing it), but only the fields the operation reads are decoded, and a `set`'s value not at all: it is
    /// kept as canonical text, copied (issue 28) or canonicalized (issue 44).
    package static func decode(_ line: UnsafeBufferPointer<UInt8>) -> Decoded {
        let members: [JSONParser.MemberText]?
        do {
            members = try JSONParser.scanMembers(line, keys: fieldNames, wideIntegers: .refused)
        } catch {
            switch error.reason {
            case .invalidUTF8: return Decoded(id: nil, request: .failure(KVOError(.badRequest, "invalid UTF-8: \(error)")))
            case .integerOutOfRange: return Decoded(id: nil, request: .failure(KVOError(.badRequest, "\(error)")))
            default: return Decoded(id: nil, request: .failure(KVOError(.badRequest, "invalid JSON: \(error)")))
            }
        }
        guard let members else {
            let typeName = (try? JSONParser.parse(line))?.typeName ?? "a JSON object"
            return Decoded(id: nil, request: .failure(KVOError(.badRequest, "a request must be a JSON object, not \(typeName)")))
        }
        let fields = RequestFields(line: line, members: members)
        let id = fields["id"]
        if let id, !id.isScalar {
            return Decoded(id: nil, request: .failure(KVOError(.badRequest, "'id' must be a string, number, boolean or null")))
        }
        do throws(KVOError) {
            let operation = try operation(of: fields)
            let declaration = operation.declaration
            // Every member must be one of the row's fields, and `null` only where the row accepts it: one AND each
            // (docs/design.md, "Strict requests"). The message is built on the cold path.
            let presence = fields.presence
            if presence.fields & ~declaration.acceptedFields != 0 || presence.nulls & ~declaration.nullableFields != 0 {
                throw refusal(fields, declaration)
            }
            let reader = FieldReader(fields: fields)
            var request = try declaration.decode(reader)
            let atLeastRev = presence.fields & RequestField.atLeastRev.bit == 0 ? nil : try reader.optionalRevision("atLeastRev")
            // A write's modifiers (`if…`, `ttl`, `ephemeral`) are looked up only when their bits say they are there: a
            // plain write pays one AND (issue 30: a `set`'s cost must not grow).
            if presence.fields & RequestField.writeModifierBits != 0,
               let modifiers = try WriteModifiers.read(from: reader, present: presence.fields) {
                request = .modified(modifiers, request)
            }
            return Decoded(id: id, request: .success(request), atLeastRev: atLeastRev)
        } catch {
            return Decoded(id: id, request: .failure(error))
        }
    }

    /// The refusal of a request with a member its row does not accept, or a `null` where the row does not take one
    /// (the first such member, in the line's order): `bad_request` naming it, with the field the client probably
    /// meant (`NameSuggestion`), or, when the field belongs to other rows (`ttl`, the conditions, `ephemeral`,
    /// `atLeastRev`), which rows take it. The cold path of `decode`.
    static func refusal(_ fields: RequestFields, _ declaration: OperationDeclaration) -> KVOError {
        for member in fields.members {
            guard let field = RequestField.of(member), declaration.acceptedFields & field.bit != 0 else {
                return unknownField(member.key, declaration)
            }
            if declaration.nullableFields & field.bit == 0, fields.line[member.range.lowerBound] == UInt8(ascii: "n"),
               let type = declaration.fields.first(where: { $0.field == field })?.type {
                return KVOError(.badRequest, "'\(field.name)' must be \(type.withArticle), not null (leave the field out instead)",
                                details: ["field": .string(field.name)])
            }
        }
        return KVOError(.badRequest, "malformed request")
    }

    private static func unknownField(_ name: String, _ declaration: OperationDeclaration) -> KVOError {
        let details: [String: JSONValue] = ["field": .string(name)]
        switch RequestField.named(name) {
        case .ttl?: return KVOError(.badRequest, "'ttl' goes with \(RequestDecoder.ttlOperations) only", details: details)
        case .ephemeral?: return KVOError(.badRequest, "'ephemeral' goes with \(RequestDecoder.ephemeralOperations) only", details: details)
        case .atLeastRev?: return KVOError(.badRequest, "'atLeastRev' goes with \(RequestDecoder.atLeastRevOperations) only", details: details)
        case .ifExists?, .ifAbsent?, .ifEquals?, .ifRev?:
            return KVOError(.badRequest, "'ifExists', 'ifAbsent', 'ifEquals' and 'ifRev' go with \(RequestDecoder.conditionalOperations) only",
                            details: details)
        default:
            let names = declaration.fields.map(\.field.name)
            let message = NameSuggestion.unknownField(name, among: names)
            guard message.hasSuffix("?)") else {
                return KVOError(.badRequest, "\(message): \(declaration.name) takes \(names.joined(separator: ", "))", details: details)
            }
            return KVOError(.badRequest, message, details: details)
        }
    }

    /// The reply to anything but `hello`, `auth` and `ping` from a connection that has not logged in
    /// (users defined): `decodeBeforeLogin`.
    package static let loginRequired = KVOError(
        .unauthenticated, "authenticate first: {\"op\":\"auth\",\"user\":…,\"password\":…}")

    /// "get, list, info and observe": the operations whose row accepts `atLeastRev`, for its error message.
    static let atLeastRevOperations: String = {
        let names = ProtocolOperation.allCases.filter { $0.declaration.acceptsAtLeastRev }.map(\.name)
        return names.count < 2 ? names.joined() : names.dropLast().joined(separator: ", ") + " and " + names.last!
    }()

    /// "create and set": the operations whose row accepts `ttl`, for its error message.
    static let ttlOperations: String = {
        let names = ProtocolOperation.allCases.filter { $0.declaration.modifiers.contains(.ttl) }.map(\.name)
        return names.count < 2 ? names.joined() : names.dropLast().joined(separator: ", ") + " and " + names.last!
    }()

    /// "create": the operations whose row accepts `ephemeral`, for its error message.
    static let ephemeralOperations: String = {
        let names = ProtocolOperation.allCases.filter { $0.declaration.modifiers.contains(.ephemeral) }.map(\.name)
        return names.count < 2 ? names.joined() : names.dropLast().joined(separator: ", ") + " and " + names.last!
    }()

    /// "create, delete, set, …": the operations whose row accepts write conditions, for its error message.
    static let conditionalOperations: String = {
        let names = ProtocolOperation.allCases.filter { $0.declaration.modifiers.contains(.conditions) }.map(\.name)
        return names.count < 2 ? names.joined() : names.dropLast().joined(separator: ", ") + " and " + names.last!
    }()

    /// Decodes a line from a connection that has not logged in (users defined): `hello`, `auth` and
    /// `ping` as `decode` does; anything else, malformed or not (not JSON, not an object, no `op`, an
    /// unknown op, a known one with missing or mistyped fields), is `loginRequired`, with the line's
    /// `id` when it has a readable one, so that nothing about the protocol's shapes is told before a
    /// login.
    package static func decodeBeforeLogin(_ line: UnsafeBufferPointer<UInt8>) -> Decoded {
        guard let members = try? JSONParser.scanMembers(line, keys: fieldNames, wideIntegers: .refused) else {
            return Decoded(id: nil, request: .failure(loginRequired))
        }
        let fields = RequestFields(line: line, members: members)
        let id = fields["id"].flatMap { $0.isScalar ? $0 : nil }
        // Only the operations whose row allows it are decoded before a login.
        guard case let .string(op)? = fields["op"], let operation = ProtocolOperation(named: op), operation.declaration.beforeLogin else {
            return Decoded(id: id, request: .failure(loginRequired))
        }
        return decode(line)
    }

    /// Decodes a line given as bytes.
    package static func decode(_ line: [UInt8]) -> Decoded {
        line.withUnsafeBufferPointer { decode($0) }
    }

    /// The operation named by `op`.
    private static func operation(of fields: RequestFields) throws(KVOError) -> ProtocolOperation {
        // The usual case, an `op` written plainly: looked up by its bytes, no `String` made.
        if let text = fields.plainText("op"), let operation = ProtocolOperation(nameText: text) { return operation }
        guard let opValue = fields["op"] else { throw KVOError(.badRequest, "missing 'op'") }
        guard case let .string(op) = opValue else { throw KVOError(.badRequest, "'op' must be a string") }
        guard let operation = ProtocolOperation(named: op) else {
            throw KVOError(.unknownOp, "unknown op '\(op)'")
        }
        return operation
    }
}
