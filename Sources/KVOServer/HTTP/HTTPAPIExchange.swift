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
        /// `observe`: a Server-Sent Events stream (`200`, `text/event-stream`, until the connection closes), its
        /// events queued by `HTTPFraming` after this response.
        case stream
    }

    var shape: Shape
    var keepAlive: Bool
    /// Whether the request had If-Match or If-None-Match: a refused condition is then 412.
    var conditional: Bool
    /// Headers every response to this request carries (CORS for an allowed cross-origin page: `Server+HTTPAPI`).
    var extraHeaders: [(String, String)] = []

    /// The HTTP response for `reply` (one JSON-lines reply, newline included); without its body for HEAD. `startsStream`:
    /// the response begins an event stream (an `observe` that succeeded).
    func response(to reply: UnsafeRawBufferPointer) -> (response: [UInt8], startsStream: Bool) {
        if case .stream = shape, let head = streamHead(for: reply) { return (head, true) }
        let response = fullResponse(to: reply)
        if case .read(headOnly: true) = shape { return (HTTPResponse.headOnly(response), false) }
        return (response, false)
    }

    /// The head of an event stream when `reply` is a success (then the stream's first line, a comment, names the
    /// subscription and the revision it starts at); nil for a refusal, answered as any error.
    private func streamHead(for reply: UnsafeRawBufferPointer) -> [UInt8]? {
        guard case let .object(fields)? = try? JSONParser.parse(UnsafeBufferPointer(start: reply.baseAddress?.assumingMemoryBound(to: UInt8.self), count: reply.count)),
              fields["ok"] == .bool(true) else { return nil }
        var text = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\n"
        text += "X-Content-Type-Options: nosniff\r\nX-Accel-Buffering: no\r\nConnection: close\r\n"
        for (name, value) in extraHeaders { text += "\(name): \(value)\r\n" }
        if let rev = fields["rev"]?.intValue { text += "Kvod-Rev: \(rev)\r\n" }
        text += "\r\n: observing"
        if let sub = fields["sub"]?.intValue { text += " sub \(sub)" }
        if let rev = fields["rev"]?.intValue { text += " at rev \(rev)" }
        text += "\n\n"
        return Array(text.utf8)
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
            var problem = HTTPAPIProblem(error: error, conditional: conditional)
            problem.headers += extraHeaders
            return problem.response(keepAlive: keepAlive)
        }
        var headers = extraHeaders
        if let rev = fields["rev"]?.intValue { headers.append(("Kvod-Rev", String(rev))) }
        switch shape {
        case .read:
            if let changed = fields["changedRev"]?.intValue { headers.append(("ETag", "\"\(changed)\"")) }
            if let expiresAt = fields["expiresAt"]?.intValue { headers.append(("Kvod-Expires-At", String(expiresAt))) }
            var body = JSONWriter.bytes(fields["value"] ?? .null)
            body.append(0x0A)
            return HTTPResponse.make(.ok, contentType: "application/json", body: body, keepAlive: keepAlive, extraHeaders: headers)
        case .stream:
            // Never here for a success (`streamHead`).
            return HTTPResponse.make(.ok, contentType: "application/json", body: Array("{}\n".utf8), keepAlive: keepAlive, extraHeaders: headers)
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
