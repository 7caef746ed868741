import KVOJSON
import KVOModel

/// One HTTP API request waiting for its reply: how the JSON-lines reply to the request it was translated into
/// (`HTTPAPIRoute`) becomes its HTTP response. Held in order by the connection's `HTTPFraming`, which turns each
/// reply into the response of the oldest waiting exchange (replies come in request order). A value; loop thread.
struct HTTPAPIExchange {
    enum Shape {
        /// `get`: the value (200, or only the headers for HEAD), `ETag: "<changedRev>"` and `Kvod-Rev`.
        case read(headOnly: Bool)
        /// A write: `{"rev": R}` (and `value` for an increment, `results` for a batch); 201 for a create.
        case write(created: Bool)
    }

    var shape: Shape
    var keepAlive: Bool
    /// Whether the request had If-Match or If-None-Match: a refused condition is then 412.
    var conditional: Bool

    /// The HTTP response for `reply` (one JSON-lines reply, newline included); without its body for HEAD.
    func response(to reply: UnsafeRawBufferPointer) -> [UInt8] {
        let response = fullResponse(to: reply)
        if case .read(headOnly: true) = shape { return HTTPResponse.headOnly(response) }
        return response
    }

    private func fullResponse(to reply: UnsafeRawBufferPointer) -> [UInt8] {
        let parsed: JSONValue
        do throws(JSONParseError) {
            parsed = try JSONParser.parse(UnsafeBufferPointer(start: reply.baseAddress?.assumingMemoryBound(to: UInt8.self), count: reply.count))
        } catch {
            return HTTPAPIProblem(status: .serviceUnavailable, code: "unavailable", detail: "kvod's reply could not be read: \(error)")
                .response(keepAlive: false)
        }
        guard case let .object(fields) = parsed else {
            return HTTPAPIProblem(status: .serviceUnavailable, code: "unavailable", detail: "kvod's reply was not an object").response(keepAlive: false)
        }
        if fields["ok"] != .bool(true) {
            guard case let .object(error)? = fields["error"] else {
                return HTTPAPIProblem(status: .badRequest, code: "bad_request", detail: "refused").response(keepAlive: keepAlive)
            }
            return HTTPAPIProblem(error: error, conditional: conditional).response(keepAlive: keepAlive)
        }
        var headers: [(String, String)] = []
        if let rev = fields["rev"]?.intValue { headers.append(("Kvod-Rev", String(rev))) }
        switch shape {
        case .read:
            if let changed = fields["changedRev"]?.intValue { headers.append(("ETag", "\"\(changed)\"")) }
            if let expiresAt = fields["expiresAt"]?.intValue { headers.append(("Kvod-Expires-At", String(expiresAt))) }
            var body = JSONWriter.bytes(fields["value"] ?? .null)
            body.append(0x0A)
            return HTTPResponse.make(.ok, contentType: "application/json", body: body, keepAlive: keepAlive, extraHeaders: headers)
        case let .write(created):
            var result = fields
            result["ok"] = nil
            result["id"] = nil
            var body = JSONWriter.bytes(.object(result))
            body.append(0x0A)
            return HTTPResponse.make(created ? .created : .ok, contentType: "application/json", body: body, keepAlive: keepAlive,
                                     extraHeaders: headers)
        }
    }
}
