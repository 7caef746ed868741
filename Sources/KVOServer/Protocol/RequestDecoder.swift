import KVOEngine
import KVOJSON
import KVOModel

/// Turns one request line into a `Request`, or into the error its reply must carry.
///
/// Stateless; any thread. Unknown fields are ignored (room for later protocol versions); missing or
/// mistyped fields, unknown options and malformed key paths are `bad_request`, an unknown `op`
/// is `unknown_op`.
package enum RequestDecoder {
    /// Longest object id accepted, in bytes.
    package static let maximumObjectIDLength = ObjectID.maximumLength

    /// The request fields every line repeats: parsed as these strings, not built again for each line.
    private static let fieldNames = JSONParser.KeyTable([
        "op", "id", "object", "keyPath", "value", "values", "index", "indexes", "options", "sinceRev", "sub", "pattern",
        "class", "client", "now", "binding", "from", "to", "limit", "after", "user", "password", "token", "rules", "hashCost",
        "atLeastRev", "by", "ifExists", "ifAbsent", "ifEquals", "ifRev", "ops", "objects", "where", "ttl", "changedRev",
        "ephemeral", "resume", "grace", "request", "action",
    ])

    /// The outcome of decoding one line: the `id` to echo (nil when absent or unreadable) and the
    /// request or its error.
    package struct Decoded {
        package let id: JSONValue?
        package let request: Result<Request, KVOError>
        /// `atLeastRev` of a `get`, `list`, `info` or `observe`: the revision the server must have reached
        /// before it answers (read-your-writes across cluster nodes; docs/protocol.md, "Cluster"); nil when absent.
        package var atLeastRev: UInt64? = nil

        /// A `set`'s value exactly as `JSONWriter` encodes it, when the request carried it in that form
        /// (`HeldValue.text`); nil otherwise.
        package var valueText: [UInt8]? {
            guard case let .success(.set(_, _, value)) = request else { return nil }
            return value.text?.bytes
        }
    }

    /// Decodes a line (without its newline). The line is checked whole (`JSONParser.scanMembers`, as strict
    /// as parsing it), but only the fields the operation reads are decoded, and a `set`'s value sent in
    /// canonical form not at all (issue 28).
    package static func decode(_ line: UnsafeBufferPointer<UInt8>) -> Decoded {
        let members: [JSONParser.MemberText]?
        do {
            members = try JSONParser.scanMembers(line, keys: fieldNames)
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
            var (operation, request) = try decode(fields)
            let reader = FieldReader(fields: fields)
            let atLeastRev = try reader.optionalRevision("atLeastRev")
            if atLeastRev != nil, !operation.declaration.acceptsAtLeastRev {
                throw KVOError(.badRequest, "'atLeastRev' goes with \(RequestDecoder.atLeastRevOperations) only")
            }
            // One pass over the names for the rare members (`if…`, `ttl`) before looking any of them up: a plain
            // write must not pay five lookups (issue 30: a `set`'s cost must not grow).
            let rare = fields.rareWriteMembers
            if rare.ttl, let ttl = try reader.ttl() {
                guard operation.declaration.acceptsTTL else {
                    throw KVOError(.badRequest, "'ttl' goes with \(RequestDecoder.ttlOperations) only")
                }
                request = .expiring(ttl: ttl, request)
            }
            if rare.conditions, let conditions = try reader.writeConditions() {
                guard operation.declaration.acceptsConditions else {
                    throw KVOError(.badRequest, "'ifExists', 'ifAbsent', 'ifEquals' and 'ifRev' go with \(RequestDecoder.conditionalOperations) only")
                }
                request = .conditional(conditions, request)
            }
            if rare.ephemeral, try reader.optionalBool("ephemeral") == true {
                guard operation.declaration.acceptsEphemeral else {
                    throw KVOError(.badRequest, "'ephemeral' goes with \(RequestDecoder.ephemeralOperations) only")
                }
                request = .ephemeral(request)
            }
            return Decoded(id: id, request: .success(request), atLeastRev: atLeastRev)
        } catch {
            return Decoded(id: id, request: .failure(error))
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
        let names = ProtocolOperation.allCases.filter { $0.declaration.acceptsTTL }.map(\.name)
        return names.count < 2 ? names.joined() : names.dropLast().joined(separator: ", ") + " and " + names.last!
    }()

    /// "create": the operations whose row accepts `ephemeral`, for its error message.
    static let ephemeralOperations: String = {
        let names = ProtocolOperation.allCases.filter { $0.declaration.acceptsEphemeral }.map(\.name)
        return names.count < 2 ? names.joined() : names.dropLast().joined(separator: ", ") + " and " + names.last!
    }()

    /// "create, delete, set, …": the operations whose row accepts write conditions, for its error message.
    static let conditionalOperations: String = {
        let names = ProtocolOperation.allCases.filter { $0.declaration.acceptsConditions }.map(\.name)
        return names.count < 2 ? names.joined() : names.dropLast().joined(separator: ", ") + " and " + names.last!
    }()

    /// Decodes a line from a connection that has not logged in (users defined): `hello`, `auth` and
    /// `ping` as `decode` does; anything else, malformed or not (not JSON, not an object, no `op`, an
    /// unknown op, a known one with missing or mistyped fields), is `loginRequired`, with the line's
    /// `id` when it has a readable one, so that nothing about the protocol's shapes is told before a
    /// login.
    package static func decodeBeforeLogin(_ line: UnsafeBufferPointer<UInt8>) -> Decoded {
        guard let members = try? JSONParser.scanMembers(line, keys: fieldNames) else {
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

    /// The operation named by `op` and its row's decoder. Unknown fields are ignored.
    private static func decode(_ fields: RequestFields) throws(KVOError) -> (ProtocolOperation, Request) {
        // The usual case, an `op` written plainly: looked up by its bytes, no `String` made.
        if let text = fields.plainText("op"), let operation = ProtocolOperation(nameText: text) {
            return (operation, try operation.declaration.decode(FieldReader(fields: fields)))
        }
        guard let opValue = fields["op"] else { throw KVOError(.badRequest, "missing 'op'") }
        guard case let .string(op) = opValue else { throw KVOError(.badRequest, "'op' must be a string") }
        guard let operation = ProtocolOperation(named: op) else {
            throw KVOError(.unknownOp, "unknown op '\(op)'")
        }
        return (operation, try operation.declaration.decode(FieldReader(fields: fields)))
    }

    // MARK: - The decoders of `OperationTable`'s rows (the simplest are written in the table itself)

    static func hello(_ reader: FieldReader) throws(KVOError) -> Request {
        let client = try reader.optionalString("client")
        guard let name = try reader.optionalString("events") else { return .hello(client: client) }
        guard let events = EventEncoding(rawValue: name) else {
            throw KVOError(.badRequest, "unknown events encoding '\(PrintableText.escaped(name, limit: 64))': \(EventEncoding.names)")
        }
        return .hello(client: client, events: events)
    }

    static func auth(_ reader: FieldReader) throws(KVOError) -> Request {
        if let token = try reader.optionalString("token") {
            guard !reader.fields.contains("user"), !reader.fields.contains("password") else {
                throw KVOError(.badRequest, "auth takes either 'token' or 'user' and 'password', not both")
            }
            return .auth(.token(token))
        }
        let user = try reader.string("user")
        let password = try reader.string("password")
        guard password.utf8.count <= PasswordHasher.maximumPasswordLength else {
            throw KVOError(.badRequest, "'password' is longer than \(PasswordHasher.maximumPasswordLength) bytes")
        }
        return .auth(.password(user: user, password: password))
    }

    static func create(_ reader: FieldReader) throws(KVOError) -> Request {
        let values = try reader.optionalObject("values") ?? [:]
        return .create(object: try reader.objectID(), values: values, className: try reader.optionalString("class"))
    }

    static func set(_ reader: FieldReader) throws(KVOError) -> Request {
        guard let value = reader.fields.heldValue(of: "value") else { throw KVOError(.badRequest, "missing 'value'") }
        return .set(object: try reader.objectID(), keyPath: try reader.keyPath(), value: value)
    }

    /// `by`: an integer or a finite number, 1 when absent.
    static func increment(_ reader: FieldReader) throws(KVOError) -> Request {
        let by: JSONValue
        switch reader.fields["by"] {
        case nil, .null?: by = .int(1)
        case let .int(step)?: by = .int(step)
        case let .double(step)? where step.isFinite: by = .double(step)
        case let other?: throw KVOError(.badRequest, "'by' must be a number, not \(other.typeName)")
        }
        return .increment(object: try reader.objectID(), keyPath: try reader.keyPath(), by: by)
    }

    /// `ops`: a list of request objects, each a write of one object (a row with `batchable`), decoded
    /// exactly as a line of its own would be (its conditions included) but without an `id`. A part that
    /// does not decode makes the batch `bad_request` naming the part.
    static func batch(_ reader: FieldReader) throws(KVOError) -> Request {
        guard let ops = reader.fields["ops"] else { throw KVOError(.badRequest, "missing 'ops'") }
        guard case let .array(parts) = ops else { throw KVOError(.badRequest, "'ops' must be an array, not \(ops.typeName)") }
        guard !parts.isEmpty else { throw KVOError(.badRequest, "'ops' must hold at least one write") }
        guard parts.count <= KVOEngine.maximumBatchParts else {
            throw KVOError(.tooLarge, "a batch holds at most \(KVOEngine.maximumBatchParts) writes, not \(parts.count)",
                           details: ["limit": .int(Int64(KVOEngine.maximumBatchParts))])
        }
        var requests: [Request] = []
        requests.reserveCapacity(parts.count)
        for (index, part) in parts.enumerated() {
            func refused(_ error: KVOError) -> KVOError {
                var details = error.details
                details["part"] = .int(Int64(index))
                return KVOError(error.code, "part \(index): \(error.message)", details: details)
            }
            guard case let .object(members) = part else {
                throw refused(KVOError(.badRequest, "a part must be a request object, not \(part.typeName)"))
            }
            guard members["id"] == nil else {
                throw refused(KVOError(.badRequest, "a part carries no 'id' (the batch's reply answers for all of them)"))
            }
            let decoded = decode(JSONWriter.bytes(part))
            let request: Request
            switch decoded.request {
            case let .success(success): request = success
            case let .failure(error): throw refused(error)
            }
            if case .ephemeral = request {
                throw refused(KVOError(.badRequest, "'ephemeral' cannot be part of a batch: create an ephemeral object alone"))
            }
            guard request.operation.declaration.batchable else {
                throw refused(KVOError(.badRequest, "'\(request.operation.name)' cannot be part of a batch: \(RequestDecoder.batchOperations) can"))
            }
            requests.append(request)
        }
        return .batch(requests)
    }

    /// `session`: `resume` (a session id, as `session` gave it) and `grace` (seconds, 0 to
    /// `SessionLimits.maximumGraceSeconds`), both optional.
    static func session(_ reader: FieldReader) throws(KVOError) -> Request {
        let resume = try reader.optionalString("resume")
        if let resume, !PresenceSession.isWellFormedID(resume) {
            throw KVOError(.badRequest, "'resume' must be a session id as 'session' gave it (32 hex digits)")
        }
        var grace: Int64?
        switch reader.fields["grace"] {
        case nil, .null?:
            grace = nil
        case let .int(seconds)? where (0...SessionLimits.maximumGraceSeconds).contains(seconds):
            grace = seconds * 1000
        case let .double(seconds)? where seconds.isFinite && seconds >= 0 && seconds <= Double(SessionLimits.maximumGraceSeconds):
            grace = Int64((seconds * 1000).rounded(.up))
        default:
            throw KVOError(.badRequest, "'grace' must be a number of seconds from 0 to \(SessionLimits.maximumGraceSeconds)")
        }
        return .session(resume: resume, grace: grace)
    }

    /// `request`: one write, as a request object of its own (its conditions included, no `id`), of a row that
    /// writes objects (`.engine` route, `isWrite`) or a `batch`; at most `SessionLimits.maximumActionBytes`
    /// once encoded. Not `ephemeral` (the session it would belong to is ending).
    static func onDisconnect(_ reader: FieldReader) throws(KVOError) -> Request {
        guard let value = reader.fields["request"] else { throw KVOError(.badRequest, "missing 'request'") }
        guard case let .object(members) = value else {
            throw KVOError(.badRequest, "'request' must be a request object, not \(value.typeName)")
        }
        guard members["id"] == nil else {
            throw KVOError(.badRequest, "'request' carries no 'id' (nobody is answered when it runs)")
        }
        let line = JSONWriter.bytes(value)
        guard line.count <= SessionLimits.maximumActionBytes else {
            throw KVOError(.tooLarge, "an onDisconnect request takes at most \(SessionLimits.maximumActionBytes) bytes, not \(line.count)",
                           details: ["limit": .int(Int64(SessionLimits.maximumActionBytes))])
        }
        let write: Request
        switch decode(line).request {
        case let .success(decoded): write = decoded
        case let .failure(error): throw KVOError(error.code, "'request': \(error.message)", details: error.details)
        }
        let declaration = write.operation.declaration
        guard declaration.isWrite, declaration.route == .engine, declaration.requirement != .serverAdmin else {
            throw KVOError(.badRequest, "'request' must be a write of objects (create, delete, set, increment, insert, remove, replace, touch or batch), not '\(declaration.name)'")
        }
        if case .ephemeral = write { throw KVOError(.badRequest, "'request' cannot be ephemeral: it runs when the session ends") }
        switch write.operation {
        case .bind, .combineLatest, .unbind:
            throw KVOError(.badRequest, "'request' must be a write of objects, not '\(declaration.name)'")
        default:
            break
        }
        return .onDisconnect(line: line, write: write)
    }

    /// Most ids one `access` asks about.
    package static let maximumAccessObjects = 1_000

    /// `objects`: optional, an array of at most `maximumAccessObjects` object ids.
    static func touch(_ reader: FieldReader) throws(KVOError) -> Request {
        .touch(object: try reader.objectID())
    }

    static func expire(_ reader: FieldReader) throws(KVOError) -> Request {
        guard let changedRev = try reader.optionalRevision("changedRev") else { throw KVOError(.badRequest, "missing 'changedRev'") }
        return .expire(object: try reader.objectID(), changedRev: changedRev)
    }

    static func access(_ reader: FieldReader) throws(KVOError) -> Request {
        guard let value = reader.fields["objects"], value != .null else { return .access(objects: []) }
        guard case let .array(elements) = value else { throw KVOError(.badRequest, "'objects' must be an array, not \(value.typeName)") }
        guard elements.count <= maximumAccessObjects else {
            throw KVOError(.tooLarge, "'objects' holds at most \(maximumAccessObjects) ids, not \(elements.count)",
                           details: ["limit": .int(Int64(maximumAccessObjects))])
        }
        var ids: [String] = []
        for element in elements {
            guard case let .string(id) = element, !id.isEmpty, id.utf8.count <= maximumObjectIDLength else {
                throw KVOError(.badRequest, "'objects' must hold object ids (non-empty strings of at most \(maximumObjectIDLength) bytes)")
            }
            ids.append(id)
        }
        return .access(objects: ids)
    }

    /// "create, delete, set, …": the operations a batch may hold, for its error message.
    static let batchOperations: String = {
        let names = ProtocolOperation.allCases.filter { $0.declaration.batchable }.map(\.name)
        return names.count < 2 ? names.joined() : names.dropLast().joined(separator: ", ") + " and " + names.last!
    }()

    static func insert(_ reader: FieldReader) throws(KVOError) -> Request {
        let values = try reader.elementValues()
        let indexes: [Int]?
        switch try reader.elementIndexes() {
        case nil: indexes = nil
        case let .single(index)?: indexes = Array(index..<(index + values.count))
        case let .many(list)?:
            guard reader.gaveValueList else {
                throw KVOError(.badRequest, "'indexes' goes with 'values' (use 'index' with 'value')")
            }
            indexes = list
        }
        return .mutateArray(object: try reader.objectID(), keyPath: try reader.keyPath(),
                            mutation: .insert(indexes: indexes, values: values))
    }

    static func remove(_ reader: FieldReader) throws(KVOError) -> Request {
        guard let shape = try reader.elementIndexes() else { throw KVOError(.badRequest, "missing 'index' or 'indexes'") }
        return .mutateArray(object: try reader.objectID(), keyPath: try reader.keyPath(),
                            mutation: .remove(indexes: shape.list))
    }

    static func replace(_ reader: FieldReader) throws(KVOError) -> Request {
        guard let shape = try reader.elementIndexes() else { throw KVOError(.badRequest, "missing 'index' or 'indexes'") }
        let values = try reader.elementValues()
        switch shape {
        case .single where reader.gaveValueList:
            throw KVOError(.badRequest, "'index' goes with 'value' (use 'indexes' with 'values')")
        case .many where !reader.gaveValueList:
            throw KVOError(.badRequest, "'indexes' goes with 'values' (use 'index' with 'value')")
        default:
            break
        }
        return .mutateArray(object: try reader.objectID(), keyPath: try reader.keyPath(),
                            mutation: .replace(indexes: shape.list, values: values))
    }

    static func observe(_ reader: FieldReader) throws(KVOError) -> Request {
        if reader.fields.contains("pattern") {
            guard !reader.fields.contains("object") else {
                throw KVOError(.badRequest, "observe takes either 'object' or 'pattern', not both")
            }
            let filter = try reader.optionalString("where").map { text throws(KVOError) in try LiveQuery.compile(text) }
            return .observePattern(pattern: try reader.pattern(), keyPath: try reader.optionalKeyPath(), filter: filter,
                                   options: try reader.options(), sinceRev: try reader.optionalRevision("sinceRev"))
        }
        guard !reader.fields.contains("where") else {
            throw KVOError(.badRequest, "'where' makes a live query of a pattern observation: it goes with 'pattern', not 'object'")
        }
        return .observe(object: try reader.objectID(), keyPath: try reader.keyPath(), options: try reader.options(),
                        sinceRev: try reader.optionalRevision("sinceRev"))
    }

    static func unobserve(_ reader: FieldReader) throws(KVOError) -> Request {
        guard let sub = reader.fields["sub"] else { throw KVOError(.badRequest, "missing 'sub'") }
        guard case let .int(subscription) = sub else { throw KVOError(.badRequest, "'sub' must be an integer") }
        return .unobserve(subscription: subscription)
    }

    static func defineClass(_ reader: FieldReader) throws(KVOError) -> Request {
        guard let definition = reader.fields["class"] else { throw KVOError(.badRequest, "missing 'class'") }
        return .defineClass(definition: definition)
    }

    static func binding(_ kind: BindingSpec.Kind, _ reader: FieldReader) throws(KVOError) -> Request {
        let spec = try BindingSpec(kind: kind) { reader.fields[$0] }
        return .bind(spec, now: try reader.optionalBool("now") ?? false)
    }

    static func unbind(_ reader: FieldReader) throws(KVOError) -> Request {
        guard let value = reader.fields["binding"] else { throw KVOError(.badRequest, "missing 'binding'") }
        guard case let .int(binding) = value, binding > 0 else {
            throw KVOError(.badRequest, "'binding' must be a positive integer")
        }
        return .unbind(binding: UInt64(binding))
    }
}

/// A request's members as `JSONParser.scanMembers` found them in its line: checked, not yet decoded. A
/// member's value is decoded when an operation's decoder reads it, so that a request pays only for the
/// fields it uses and a `set`'s canonical value stays text (`heldValue(of:)`).
///
/// Looked up by a linear scan: a request has a handful of members, so this beats hashing. When a name
/// repeats, the last one counts (as it would in a dictionary built in order). Holds the line's bytes
/// unowned: lives only while the line is being decoded (`RequestDecoder.decode`), on the caller's thread.
struct RequestFields {
    let line: UnsafeBufferPointer<UInt8>
    let members: [JSONParser.MemberText]

    /// The (last) member called `name`, decoded.
    subscript(name: String) -> JSONValue? {
        position(of: name).map(value(at:))
    }

    /// Whether the request has a member called `name` (null or not), without decoding it.
    func contains(_ name: String) -> Bool {
        position(of: name) != nil
    }

    /// Whether the member called `name` is absent or null, without decoding it.
    func isAbsentOrNull(_ name: String) -> Bool {
        guard let position = position(of: name) else { return true }
        return line[members[position].range.lowerBound] == UInt8(ascii: "n")
    }

    /// The member called `name` as a `set` carries it: its canonical text when the request wrote it so,
    /// else decoded.
    func heldValue(of name: String) -> HeldValue? {
        guard let position = position(of: name) else { return nil }
        let member = members[position]
        guard member.isCompact else { return .decoded(value(at: position)) }
        return .text(CanonicalText(trusting: Array(UnsafeBufferPointer(rebasing: line[member.range]))))
    }

    /// The member called `name` when it is a string written without escapes, read straight from the line
    /// (no `JSONValue` built); nil when absent, not a string or escaped (then decode it with the subscript).
    func plainString(_ name: String) -> String? {
        plainText(name).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The bytes between the quotes of `plainString(name)`, in the line.
    func plainText(_ name: String) -> UnsafeBufferPointer<UInt8>? {
        guard let position = position(of: name) else { return nil }
        let member = members[position]
        guard member.isCompact, line[member.range.lowerBound] == UInt8(ascii: "\"") else { return nil }
        return UnsafeBufferPointer(rebasing: line[(member.range.lowerBound + 1)..<(member.range.upperBound - 1)])
    }

    private func value(at position: Int) -> JSONValue {
        let member = members[position]
        let first = line[member.range.lowerBound]
        if member.isCompact, first == UInt8(ascii: "-") || (first >= UInt8(ascii: "0") && first <= UInt8(ascii: "9")) {
            // A compact number is an integer in its shortest form that fits Int64 (the scan proved it): its
            // digits are read here, without a parser (most requests' `id`).
            let negative = first == UInt8(ascii: "-")
            var magnitude: UInt64 = 0
            for digit in line[(member.range.lowerBound + (negative ? 1 : 0))..<member.range.upperBound] {
                magnitude = magnitude &* 10 &+ UInt64(digit &- UInt8(ascii: "0"))
            }
            return .int(negative ? Int64(truncatingIfNeeded: 0 &- magnitude) : Int64(truncatingIfNeeded: magnitude))
        }
        do {
            return try JSONParser.parse(UnsafeBufferPointer(rebasing: line[members[position].range]))
        } catch {
            preconditionFailure("a member checked by scanMembers does not parse: \(error)")
        }
    }

    /// Where the (last) member called `name` is. Lengths are compared first: the names of a request
    /// mostly differ in length, and a short string's length costs a few instructions where `==` of two
    /// different strings calls into the standard library (about 30).
    private func position(of name: String) -> Int? {
        let length = name.utf8.count
        var index = members.endIndex
        while index > members.startIndex {
            index -= 1
            let key = members[index].key
            if key.utf8.count == length && key == name { return index }
        }
        return nil
    }
}

/// A request's fields read as the protocol's types, with its error messages.
struct FieldReader {
    let fields: RequestFields

    func string(_ name: String) throws(KVOError) -> String {
        if let text = fields.plainString(name) { return text }
        guard let value = fields[name] else { throw KVOError(.badRequest, "missing '\(name)'") }
        guard case let .string(text) = value else { throw KVOError(.badRequest, "'\(name)' must be a string, not \(value.typeName)") }
        return text
    }

    func optionalString(_ name: String) throws(KVOError) -> String? {
        if fields.isAbsentOrNull(name) { return nil }
        return try string(name)
    }

    func optionalBool(_ name: String) throws(KVOError) -> Bool? {
        guard let value = fields[name], value != .null else { return nil }
        guard case let .bool(flag) = value else { throw KVOError(.badRequest, "'\(name)' must be true or false, not \(value.typeName)") }
        return flag
    }

    func optionalObject(_ name: String) throws(KVOError) -> [String: JSONValue]? {
        guard let value = fields[name], value != .null else { return nil }
        guard case let .object(members) = value else { throw KVOError(.badRequest, "'\(name)' must be an object, not \(value.typeName)") }
        return members
    }

    func objectID() throws(KVOError) -> String {
        let id = try string("object")
        guard !id.isEmpty else { throw KVOError(.badRequest, "'object' must not be empty") }
        guard id.utf8.count <= RequestDecoder.maximumObjectIDLength else {
            throw KVOError(.badRequest, "'object' is longer than \(RequestDecoder.maximumObjectIDLength) bytes")
        }
        return id
    }

    /// An object id pattern (`pattern` of `observe`): an exact id, or a glob where `*` is any run of
    /// characters; non-empty and at most as long as an object id.
    func pattern() throws(KVOError) -> ObjectIDPattern {
        let text = try string("pattern")
        do {
            return try ObjectIDPattern(text)
        } catch {
            switch error {
            case .empty:
                throw KVOError(.badRequest, "'pattern' must not be empty (use \"*\" for every object)")
            case let .tooLong(limit):
                throw KVOError(.badRequest, "'pattern' is longer than \(limit) bytes")
            }
        }
    }

    func keyPath() throws(KVOError) -> KeyPath {
        try KeyPath(try string("keyPath"))
    }

    func optionalKeyPath() throws(KVOError) -> KeyPath? {
        guard let text = try optionalString("keyPath") else { return nil }
        return try KeyPath(text)
    }

    enum IndexShape {
        case single(Int)
        case many([Int])

        var list: [Int] {
            switch self {
            case let .single(index): return [index]
            case let .many(indexes): return indexes
            }
        }
    }

    /// `index` (one non-negative integer) or `indexes` (an array of them); nil when neither.
    func elementIndexes() throws(KVOError) -> IndexShape? {
        let single = fields["index"].flatMap { $0 == .null ? nil : $0 }
        let many = fields["indexes"].flatMap { $0 == .null ? nil : $0 }
        switch (single, many) {
        case (nil, nil): return nil
        case (.some, .some): throw KVOError(.badRequest, "give 'index' or 'indexes', not both")
        case let (value?, nil): return .single(try index(value, name: "index"))
        case let (nil, value?):
            guard case let .array(items) = value, !items.isEmpty else {
                throw KVOError(.badRequest, "'indexes' must be a non-empty array of integers")
            }
            var list: [Int] = []
            for item in items { list.append(try index(item, name: "indexes")) }
            return .many(list)
        }
    }

    private func index(_ value: JSONValue, name: String) throws(KVOError) -> Int {
        guard case let .int(integer) = value, integer >= 0, integer <= Int64(Int32.max) else {
            throw KVOError(.badRequest, "'\(name)' must hold non-negative integers")
        }
        return Int(integer)
    }

    /// A positive integer (a count), when given.
    func optionalPositiveInteger(_ name: String) throws(KVOError) -> Int? {
        guard let value = fields[name], value != .null else { return nil }
        guard case let .int(integer) = value, integer > 0 else {
            throw KVOError(.badRequest, "'\(name)' must be a positive integer")
        }
        return Int(clamping: integer)
    }

    /// A non-negative integer revision, when given.
    func optionalRevision(_ name: String) throws(KVOError) -> UInt64? {
        guard let value = fields[name], value != .null else { return nil }
        guard case let .int(integer) = value, integer >= 0 else {
            throw KVOError(.badRequest, "'\(name)' must be a non-negative integer revision")
        }
        return UInt64(integer)
    }

    /// `ttl` (docs/protocol.md, "Expiry"): seconds, an integer or a finite number, from 0 (no expiry) to ten
    /// years, as whole milliseconds (a fraction rounded up: a positive ttl never becomes 0); nil when absent.
    func ttl() throws(KVOError) -> Int64? {
        guard let value = fields["ttl"], value != .null else { return nil }
        let maximumSeconds = KVOEngine.maximumTTL / 1000
        let milliseconds: Int64
        switch value {
        case let .int(seconds) where (0...maximumSeconds).contains(seconds):
            milliseconds = seconds * 1000
        case let .double(seconds) where seconds.isFinite && seconds >= 0 && seconds <= Double(maximumSeconds):
            milliseconds = Int64((seconds * 1000).rounded(.up))
        default:
            throw KVOError(.badRequest, "'ttl' must be a number of seconds from 0 (no expiry) to \(maximumSeconds)")
        }
        return milliseconds
    }

    /// Whether the request gave `values` (a list) rather than `value`.
    var gaveValueList: Bool { fields.contains("values") }

    /// `value` (one element) or `values` (a non-empty array of elements).
    func elementValues() throws(KVOError) -> [JSONValue] {
        switch (fields["value"], fields["values"]) {
        case (.some, .some): throw KVOError(.badRequest, "give 'value' or 'values', not both")
        case let (value?, nil): return [value]
        case let (nil, values?):
            guard case let .array(items) = values, !items.isEmpty else {
                throw KVOError(.badRequest, "'values' must be a non-empty array")
            }
            return items
        case (nil, nil): throw KVOError(.badRequest, "missing 'value' or 'values'")
        }
    }

    func options() throws(KVOError) -> ObservationOptions {
        guard let value = fields["options"], value != .null else { return .default }
        guard case let .array(names) = value else { throw KVOError(.badRequest, "'options' must be an array of option names") }
        var options: ObservationOptions = []
        for name in names {
            guard case let .string(text) = name else { throw KVOError(.badRequest, "'options' must be an array of option names") }
            guard let option = ObservationOptions(name: text) else {
                throw KVOError(.badRequest, "unknown option '\(text)' (expected new, old, initial or prior)")
            }
            options.insert(option)
        }
        return options
    }
}
