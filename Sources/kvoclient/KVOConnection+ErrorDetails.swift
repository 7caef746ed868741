import KVOClientKit
import KVOJSON

extension KVOConnection {
    /// Like `call`, but the message of an error reply also carries the details the class errors add:
    /// for `invalid_value`, ` (property 'l', rule 'max')` from the error's `property` and `rule`.
    /// Other codes (`read_only`, `cycle`, `invalid_expression`, ...) keep their message as it is. Thrown
    /// as `KVOClientError.server`, so the error prints and exits (1) like any other server error.
    ///
    /// Same thread rule as the connection: the thread that uses it.
    func callWithErrorDetails(_ op: String, _ params: [String: JSONValue] = [:]) throws(KVOClientError) -> [String: JSONValue] {
        let reply = try request(op, params)
        guard let fields = reply.objectValue else { throw .malformedMessage(reply.description) }
        if fields["ok"] == .bool(true) { return fields }
        let error = fields["error"]
        let code = error?["code"]?.stringValue ?? "unknown"
        var message = error?["message"]?.stringValue ?? ""
        if code == "invalid_value", let property = error?["property"]?.stringValue, let rule = error?["rule"]?.stringValue {
            message += " (property '\(property)', rule '\(rule)')"
        }
        throw .server(code: code, message: message)
    }
}
