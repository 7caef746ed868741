import KVOEngine
import KVOJSON
import KVOModel

// The decoders of `OperationTable`'s rows (the simplest are written in the table itself): each reads its row's
// fields through a `FieldReader`. Stateless; any thread.

extension RequestDecoder {
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

    /// `signal`: the payload (`value`), held as the line's text when it was written in canonical form (as `set`'s).
    static func signal(_ reader: FieldReader) throws(KVOError) -> Request {
        guard let value = reader.fields.heldValue(of: "value") else { throw KVOError(.badRequest, "missing 'value'") }
        return .signal(object: try reader.objectID(), payload: value)
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
            if request.isEphemeralWrite {
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
        if write.isEphemeralWrite { throw KVOError(.badRequest, "'request' cannot be ephemeral: it runs when the session ends") }
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

    /// `backup`: no `offset` starts one; `offset` (a non-negative integer) asks for the chunk there.
    static func backup(_ reader: FieldReader) throws(KVOError) -> Request {
        guard let value = reader.fields["offset"] else { return .backup(offset: nil) }
        guard case let .int(offset) = value, offset >= 0 else {
            throw KVOError(.badRequest, "'offset' must be a non-negative integer (the byte the next chunk begins at)")
        }
        return .backup(offset: offset)
    }

    static func defineClass(_ reader: FieldReader) throws(KVOError) -> Request {
        guard let definition = reader.fields["class"] else { throw KVOError(.badRequest, "missing 'class'") }
        return .defineClass(definition: definition)
    }

    static func binding(_ kind: BindingSpec.Kind, _ reader: FieldReader) throws(KVOError) -> Request {
        let spec = try BindingSpec(kind: kind) { reader.fields[$0] }
        return .bind(spec, now: try reader.optionalBool("now") ?? false)
    }

    /// `kill`'s `connection`: a connection id (1 or more; ids are never reused while the server runs).
    static func kill(_ reader: FieldReader) throws(KVOError) -> Request {
        guard let value = reader.fields["connection"] else { throw KVOError(.badRequest, "missing 'connection'") }
        guard case let .int(connection) = value, connection > 0 else {
            let shown = switch value {
            case let .int(number): "\(number)"
            case let .double(number): "\(number)"
            case .null: "null"
            case .array, .object: "an \(value.typeName)"
            default: "a \(value.typeName)"
            }
            throw KVOError(.badRequest, "'connection' must be a connection id (a positive integer), not \(shown)")
        }
        return .kill(connection: UInt64(connection))
    }

    static func unbind(_ reader: FieldReader) throws(KVOError) -> Request {
        guard let value = reader.fields["binding"] else { throw KVOError(.badRequest, "missing 'binding'") }
        guard case let .int(binding) = value, binding > 0 else {
            throw KVOError(.badRequest, "'binding' must be a positive integer")
        }
        return .unbind(binding: UInt64(binding))
    }
}
