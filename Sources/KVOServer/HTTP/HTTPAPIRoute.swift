import KVOJSON
import KVOModel

/// The HTTP API's routes (`/v1/…`, docs/protocol.md "HTTP API"): each HTTP request becomes the one JSON-lines request
/// it stands for, which the server then handles as it handles any line (the operations table's row gives its
/// requirement, effect and limits; the read check, the store's health and replication are the line's), and an
/// `HTTPAPIExchange` that says how its reply becomes the HTTP response. Nothing here looks at the server's state.
/// Stateless; any thread.
enum HTTPAPIRoute {
    /// What an HTTP request becomes: the request line (JSON, no newline) and how its reply is answered.
    struct Translation {
        var line: [UInt8]
        var exchange: HTTPAPIExchange
        /// A stream's `?ticket=` (`StreamTickets`): who the request is from, in place of `Authorization`.
        var ticket: String?
    }

    static let objectsPrefix = "/v1/objects/"

    /// Translates `request` (its path under `/v1/`), or says why it is refused.
    static func translate(_ request: HTTPRequestHead) -> Result<Translation, HTTPAPIProblem> {
        do throws(HTTPAPIProblem) {
            return .success(try translateOrThrow(request))
        } catch {
            return .failure(error)
        }
    }

    private static func translateOrThrow(_ request: HTTPRequestHead) throws(HTTPAPIProblem) -> Translation {
        let query = try HTTPQuery(request.query)
        let conditional = request.headers["if-match"] != nil || request.headers["if-none-match"] != nil
        if request.path == "/v1/batch" {
            guard request.method == "POST" else { throw .methodNotAllowed(request.method, allowed: "POST") }
            try query.requireOnly([])
            guard case let .object(members) = try jsonBody(request) else {
                throw .badRequest("the body of POST /v1/batch is a batch request's fields: a JSON object with 'ops'")
            }
            for field in ["op", "id"] where members[field] != nil {
                throw .badRequest("unknown field '\(field)' in the body of POST /v1/batch (the route says the op)", field: field)
            }
            // The body's own bytes after its `{`: the batch's fields as the client wrote them.
            var line: [UInt8] = Array(#"{"op":"batch""#.utf8)
            let open = request.body.firstIndex(of: UInt8(ascii: "{"))!
            let inner = request.body[(open + 1)...].drop { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
            if inner.first != UInt8(ascii: "}") { line.append(UInt8(ascii: ",")) }
            line += inner
            return Translation(line: line,
                               exchange: HTTPAPIExchange(shape: .write(created: false), keepAlive: request.keepAlive, conditional: conditional))
        }
        if request.path == "/v1/observe" {
            guard request.method == "GET" else { throw .methodNotAllowed(request.method, allowed: "GET") }
            try query.requireOnly(["pattern", "keyPath", "where", "options", "sinceRev", "ticket"])
            guard let pattern = query.value("pattern") else { throw .badRequest("GET /v1/observe needs ?pattern=", field: "pattern") }
            var fields: [(key: String, value: [UInt8])] = [("pattern", encoded(.string(pattern)))]
            if let keyPath = query.value("keyPath") { fields.append(("keyPath", encoded(.string(keyPath)))) }
            if let filter = query.value("where") { fields.append(("where", encoded(.string(filter)))) }
            fields += try streamFields(request, query)
            return Translation(line: line(op: "observe", fields: fields),
                               exchange: HTTPAPIExchange(shape: .stream, keepAlive: false, conditional: false), ticket: query.value("ticket"))
        }
        guard request.path.hasPrefix(objectsPrefix) else { throw .notFound(request.path) }
        let rest = request.path.dropFirst(objectsPrefix.count)
        var objectSegment = rest
        var keyPathSegment: Substring?
        if let slash = rest.firstIndex(of: "/") {
            objectSegment = rest[..<slash]
            keyPathSegment = rest[rest.index(after: slash)...]
        }
        var isIncrement = false
        if request.method == "POST", let segment = keyPathSegment, segment.hasSuffix(":increment") {
            isIncrement = true
            keyPathSegment = segment.dropLast(":increment".count)
        }
        let object = try percentDecoded(objectSegment, naming: "object id")
        guard !object.isEmpty else { throw .notFound(request.path) }
        let keyPath = try keyPathSegment.map { segment throws(HTTPAPIProblem) in try percentDecoded(segment, naming: "key path") }
        if let keyPath, keyPath.isEmpty { throw .badRequest("an empty key path: leave out the '/' after the object id for the whole object") }
        var fields: [(key: String, value: [UInt8])] = [("object", encoded(.string(object)))]
        if let keyPath { fields.append(("keyPath", encoded(.string(keyPath)))) }
        let conditions = try HTTPAPIRoute.conditions(request)
        func exchange(_ shape: HTTPAPIExchange.Shape) -> HTTPAPIExchange {
            HTTPAPIExchange(shape: shape, keepAlive: request.keepAlive, conditional: conditional)
        }
        if request.method == "GET", wantsEventStream(request) {
            guard conditions.isEmpty else { throw .badRequest("If-Match and If-None-Match are for writes") }
            guard keyPath != nil else {
                throw .badRequest("observing needs a key path: GET /v1/objects/{id}/{keyPath} with Accept: text/event-stream")
            }
            try query.requireOnly(["options", "sinceRev", "ticket"])
            fields += try streamFields(request, query)
            return Translation(line: line(op: "observe", fields: fields), exchange: exchange(.stream), ticket: query.value("ticket"))
        }
        switch (request.method, keyPath != nil) {
        case ("GET", _), ("HEAD", _):
            guard conditions.isEmpty else { throw .badRequest("If-Match and If-None-Match are for writes here; a read answers with the ETag to compare") }
            try query.requireOnly(["atLeastRev"])
            if let atLeastRev = try query.integer("atLeastRev") { fields.append(("atLeastRev", encoded(.int(atLeastRev)))) }
            return Translation(line: line(op: "get", fields: fields), exchange: exchange(.read(headOnly: request.method == "HEAD")))
        case ("POST", false):
            try query.requireOnly(["class", "ttl"])
            if !request.body.isEmpty {
                guard case .object = try jsonBody(request) else { throw .badRequest("the body of a create is the new object's values: a JSON object") }
                fields.append(("values", request.body))
            }
            if let className = query.value("class") { fields.append(("class", encoded(.string(className)))) }
            if let ttl = try query.number("ttl") { fields.append(("ttl", encoded(ttl))) }
            fields += conditions
            return Translation(line: line(op: "create", fields: fields), exchange: exchange(.write(created: true)))
        case ("POST", true) where isIncrement:
            try query.requireOnly([])
            if !request.body.isEmpty {
                guard case let .object(members) = try jsonBody(request) else { throw .badRequest("the body of an increment is {\"by\": n}") }
                for (key, value) in members {
                    guard key == "by" else { throw .badRequest("unknown field '\(key)' in an increment's body (it takes 'by')", field: key) }
                    fields.append(("by", encoded(value)))
                }
            }
            fields += conditions
            return Translation(line: line(op: "increment", fields: fields), exchange: exchange(.write(created: false)))
        case ("PUT", true):
            try query.requireOnly(["ttl"])
            _ = try jsonBody(request)
            fields.append(("value", request.body))
            if let ttl = try query.number("ttl") { fields.append(("ttl", encoded(ttl))) }
            fields += conditions
            return Translation(line: line(op: "set", fields: fields), exchange: exchange(.write(created: false)))
        case ("DELETE", false):
            try query.requireOnly([])
            fields += conditions
            return Translation(line: line(op: "delete", fields: fields), exchange: exchange(.write(created: false)))
        default:
            throw .methodNotAllowed(request.method, allowed: keyPath == nil ? "GET, HEAD, POST, DELETE" : "GET, HEAD, PUT, POST (:increment)")
        }
    }

    /// Whether the request asks for Server-Sent Events (`Accept: text/event-stream`).
    static func wantsEventStream(_ request: HTTPRequestHead) -> Bool {
        request.headers["accept"]?.lowercased().contains("text/event-stream") ?? false
    }

    /// An observation's `options` (`?options=initial,new,old`) and `sinceRev` (`?sinceRev=R`, or the `Last-Event-ID`
    /// an EventSource sends when it reconnects; not both).
    private static func streamFields(_ request: HTTPRequestHead, _ query: HTTPQuery) throws(HTTPAPIProblem) -> [(key: String, value: [UInt8])] {
        var fields: [(key: String, value: [UInt8])] = []
        if let options = query.value("options") {
            let names = options.split(separator: ",", omittingEmptySubsequences: false).map { JSONValue.string(String($0)) }
            fields.append(("options", encoded(.array(names))))
        }
        var sinceRev = try query.integer("sinceRev")
        if let lastEventID = request.headers["last-event-id"].map({ Substring($0).trimmingSpaces }) {
            guard sinceRev == nil else { throw .badRequest("Last-Event-ID and ?sinceRev= both say where to resume: send one", field: "sinceRev") }
            guard let rev = Int64(lastEventID), rev >= 0 else { throw .badRequest("Last-Event-ID is a revision (a non-negative integer)") }
            sinceRev = rev
        }
        if let sinceRev { fields.append(("sinceRev", encoded(.int(sinceRev)))) }
        return fields
    }

    /// `If-Match: "R"` is `ifRev: R` (a strong entity tag, as `ETag` gives it; `*` is `ifExists`), `If-None-Match: *`
    /// is `ifAbsent`. Anything else is refused, never ignored: a precondition the server cannot check must not let a
    /// write through.
    static func conditions(_ request: HTTPRequestHead) throws(HTTPAPIProblem) -> [(key: String, value: [UInt8])] {
        var conditions: [(key: String, value: [UInt8])] = []
        if let match = request.headers["if-match"].map({ Substring($0).trimmingSpaces }) {
            if match == "*" {
                conditions.append(("ifExists", encoded(true)))
            } else if match.count >= 3, match.first == "\"", match.last == "\"", let rev = Int64(match.dropFirst().dropLast()), rev >= 0 {
                conditions.append(("ifRev", encoded(.int(rev))))
            } else {
                throw .badRequest("If-Match takes one strong entity tag as ETag gives it (\"<changedRev>\") or *")
            }
        }
        if let noneMatch = request.headers["if-none-match"].map({ Substring($0).trimmingSpaces }) {
            guard noneMatch == "*" else { throw .badRequest("If-None-Match takes * (the object does not exist) on a write") }
            conditions.append(("ifAbsent", encoded(true)))
        }
        return conditions
    }

    /// The body checked to be exactly one JSON value (so that its bytes, spliced into the line as they are, are one
    /// field's value and nothing more), and that value. The line is decoded again as every line is, with its limits.
    private static func jsonBody(_ request: HTTPRequestHead) throws(HTTPAPIProblem) -> JSONValue {
        // The body is read as JSON whatever its Content-Type says (curl's `-d` says form-urlencoded); a cross-origin
        // browser request is stopped by its Origin (`Server.serveAPIRequest`), not by its type. Only a form upload,
        // which cannot be one JSON value, is named for what it is.
        if let type = request.headers["content-type"], type.lowercased().hasPrefix("multipart/") {
            throw .unsupportedMediaType(type)
        }
        guard !request.body.isEmpty else { throw .badRequest("this request needs a JSON body") }
        do throws(JSONParseError) {
            return try JSONParser.parse(request.body, wideIntegers: .refused)
        } catch {
            throw .badRequest("the body is not one JSON value: \(error)")
        }
    }

    private static func encoded(_ value: JSONValue) -> [UInt8] { JSONWriter.bytes(value) }

    /// The request line for `op` with `fields` (each value JSON text already), in order.
    private static func line(op: String, fields: [(key: String, value: [UInt8])]) -> [UInt8] {
        var line: [UInt8] = Array(#"{"op":"#.utf8)
        JSONWriter.writeString(op, into: &line)
        for (key, value) in fields {
            line.append(UInt8(ascii: ","))
            JSONWriter.writeString(key, into: &line)
            line.append(UInt8(ascii: ":"))
            line += value
        }
        line.append(UInt8(ascii: "}"))
        return line
    }

    /// A path segment with its `%XX` escapes decoded; refused when an escape is malformed or the result is not UTF-8.
    static func percentDecoded(_ segment: Substring, naming what: String) throws(HTTPAPIProblem) -> String {
        var bytes: [UInt8] = []
        let utf8 = Array(segment.utf8)
        var index = 0
        while index < utf8.count {
            let byte = utf8[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < utf8.count, let high = HexText.digitValue(utf8[index + 1]), let low = HexText.digitValue(utf8[index + 2]) else {
                    throw .badRequest("malformed percent-encoding in the \(what)")
                }
                bytes.append(high << 4 | low)
                index += 3
            } else {
                bytes.append(byte)
                index += 1
            }
        }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw .badRequest("the \(what) is not UTF-8 once percent-decoded") }
        return text
    }
}
