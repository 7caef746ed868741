import Foundation
import KVOWireProbe
import KVOJSON
import Testing

/// Helpers shared by the class, computed-property and binding suites over TCP.

/// Parses a JSON literal written in a test (a class definition, an expected reply); a malformed
/// literal is a bug in the test, so it stops the test.
func json(_ text: String) throws -> JSONValue {
    try JSONParser.parse(Array(text.utf8))
}

/// Checks that `reply` is a failure with `code` and, when given, the error members `property` and
/// `rule` (the details an `invalid_value` or `read_only` refusal carries).
func expectError(
    _ reply: JSONValue, code: String, property: String? = nil, rule: String? = nil, _ comment: String = "",
    sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(reply["ok"] == false, "\(comment): \(reply)", sourceLocation: sourceLocation)
    #expect(reply["error"]?["code"]?.stringValue == code, "\(comment): \(reply)", sourceLocation: sourceLocation)
    #expect(reply["error"]?["message"]?.stringValue?.isEmpty == false, "\(comment): \(reply)", sourceLocation: sourceLocation)
    if let property {
        #expect(reply["error"]?["property"] == .string(property), "\(comment): \(reply)", sourceLocation: sourceLocation)
    }
    if let rule {
        #expect(reply["error"]?["rule"] == .string(rule), "\(comment): \(reply)", sourceLocation: sourceLocation)
    }
}

/// Proves that `observer` received no event so far: a `ping` on the same connection is answered after
/// every event the server queued for it before, so an empty queue after the reply means none came.
func expectNoEvents(
    _ observer: KVOConnection, _ comment: String = "", sourceLocation: SourceLocation = #_sourceLocation
) throws {
    try observer.call("ping")
    #expect(observer.pendingEvents.isEmpty, "\(comment): unexpected events \(observer.pendingEvents)",
            sourceLocation: sourceLocation)
}

/// Every event `connection` has received so far (queued ones, and any that arrive before a `ping`
/// reply), taken out of its queue in arrival order.
func drainEvents(_ connection: KVOConnection) throws -> [JSONValue] {
    try connection.call("ping")
    var events: [JSONValue] = []
    while let event = try connection.nextEvent(timeout: 0) { events.append(event) }
    return events
}

/// The current global revision, read with `get` of `object`.
func currentRevision(_ connection: KVOConnection, object: String) throws -> JSONValue? {
    try connection.call("get", ["object": .string(object)])["rev"]
}
