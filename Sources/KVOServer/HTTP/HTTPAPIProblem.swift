import KVOJSON
import KVOModel

/// An HTTP API error as RFC 9457 problem details (`application/problem+json`), with kvod's error `code` beside
/// `status`, `title` and `detail`, and the error's other fields (`field`, `condition`, `rev`, `part`, …) as extension
/// members. Made either by the route (the request could not be translated) or from a reply's `error`
/// (`HTTPAPIExchange`). A value; any thread.
struct HTTPAPIProblem: Error {
    var status: HTTPStatus
    var code: String
    var detail: String
    /// The error's other members, as kvod's reply has them.
    var extensions: [String: JSONValue] = [:]
    /// Extra response headers (`Allow` on 405, `WWW-Authenticate` on 401).
    var headers: [(String, String)] = []

    static func badRequest(_ detail: String, field: String? = nil) -> HTTPAPIProblem {
        HTTPAPIProblem(status: .badRequest, code: "bad_request", detail: detail,
                       extensions: field.map { ["field": .string($0)] } ?? [:])
    }

    static func notFound(_ path: String) -> HTTPAPIProblem {
        HTTPAPIProblem(status: .notFound, code: "not_found", detail: "no HTTP API route '\(PrintableText.escaped(path, limit: 200))' (docs/protocol.md, \"HTTP API\")")
    }

    static func methodNotAllowed(_ method: String, allowed: String) -> HTTPAPIProblem {
        HTTPAPIProblem(status: .methodNotAllowed, code: "bad_request", detail: "\(method) is not served here; \(allowed) are",
                       headers: [("Allow", allowed)])
    }

    static func unsupportedMediaType(_ type: String) -> HTTPAPIProblem {
        HTTPAPIProblem(status: .unsupportedMediaType, code: "bad_request",
                       detail: "the body is JSON: Content-Type application/json, not '\(PrintableText.escaped(type, limit: 100))'")
    }

    /// The problem for kvod's error object `error` (a reply's), `conditional` when the request had If-Match or
    /// If-None-Match (a `conflict` is then 412 Precondition Failed, as HTTP says it).
    init(error: [String: JSONValue], conditional: Bool) {
        code = error["code"]?.stringValue ?? "bad_request"
        detail = error["message"]?.stringValue ?? code
        extensions = error.filter { $0.key != "code" && $0.key != "message" }
        status = HTTPAPIProblem.status(ofCode: code, conditional: conditional)
        if status == .unauthorized { headers = [("WWW-Authenticate", "Bearer realm=\"kvod\"")] }
    }

    init(status: HTTPStatus, code: String, detail: String, extensions: [String: JSONValue] = [:], headers: [(String, String)] = []) {
        self.status = status
        self.code = code
        self.detail = detail
        self.extensions = extensions
        self.headers = headers
    }

    /// The HTTP status for kvod's error code (docs/protocol.md, "HTTP API").
    static func status(ofCode code: String, conditional: Bool) -> HTTPStatus {
        switch code {
        case "unauthenticated": .unauthorized
        case "forbidden": .forbidden
        case "not_found": .notFound
        case "exists": conditional ? .preconditionFailed : .conflict
        case "conflict": conditional ? .preconditionFailed : .conflict
        case "too_large": .contentTooLarge
        case "rate_limited", "quota_exceeded", "too_many_observations": .tooManyRequests
        case "unavailable", "storage_unavailable", "too_many_connections", "closed": .serviceUnavailable
        case "storage_full": .insufficientStorage
        default: .badRequest
        }
    }

    /// The response: `application/problem+json`, members in a fixed order (type, title, status, code, detail, then
    /// the extensions sorted by name).
    func response(keepAlive: Bool) -> [UInt8] {
        var body: [UInt8] = Array(#"{"type":"about:blank","title":"#.utf8)
        JSONWriter.writeString(status.reasonPhrase, into: &body)
        body += Array(#","status":"#.utf8)
        JSONWriter.writeInteger(status.rawValue, into: &body)
        body += Array(#","code":"#.utf8)
        JSONWriter.writeString(code, into: &body)
        body += Array(#","detail":"#.utf8)
        JSONWriter.writeString(detail, into: &body)
        for key in extensions.keys.sorted() where !["type", "title", "status", "code", "detail"].contains(key) {
            body.append(UInt8(ascii: ","))
            JSONWriter.writeString(key, into: &body)
            body.append(UInt8(ascii: ":"))
            JSONWriter.write(extensions[key]!, into: &body)
        }
        body += Array("}\n".utf8)
        return HTTPResponse.make(status, contentType: "application/problem+json", body: body, keepAlive: keepAlive, extraHeaders: headers)
    }
}
