import Foundation
import KVOJSON
import KVOWireProbe
import Testing

@testable import KVOTestSupport

/// Integers are exact or refused, never rounded (issue 41; docs/protocol.md, "Numbers"), over the real kvod: an
/// integer literal outside 64 bits anywhere in a request is `bad_request` naming the field, nothing changes and
/// the connection keeps serving; the same number written as a double, and every 64-bit integer, go through exactly.
@Suite struct IntegerRangeOverTCPTests {
    /// One raw line and its reply.
    private func exchange(_ connection: KVOConnection, _ line: String) throws -> JSONValue {
        try connection.send(raw: Array((line + "\n").utf8))
        return try connection.readMessage()
    }

    @Test("an integer literal past 64 bits is refused wherever a request carries it, naming the field; nothing changes",
          arguments: [
              (#"{"op":"increment","id":1,"object":"c","keyPath":"n","by":9223372036854775808}"#, "by"),
              (#"{"op":"set","id":2,"object":"c","keyPath":"n","value":9223372036854775809}"#, "value"),
              (#"{"op":"set","id":3,"object":"c","keyPath":"n","value":[1,{"a":-9223372036854775809}]}"#, "value"),
              (#"{"op":"create","id":4,"object":"d","values":{"x":18446744073709552000}}"#, "values"),
              (#"{"op":"insert","id":5,"object":"c","keyPath":"list","index":0,"value":100000000000000000000}"#, "value"),
              (#"{"op":"insert","id":6,"object":"c","keyPath":"list","index":18446744073709551616,"value":1}"#, "index"),
              (#"{"op":"set","id":7,"object":"c","keyPath":"n","value":1,"ifRev":9223372036854775808}"#, "ifRev"),
              (#"{"op":"set","id":8,"object":"c","keyPath":"n","value":1,"ifEquals":{"keyPath":"n","value":9223372036854775808}}"#, "ifEquals"),
              (#"{"op":"ping","id":9223372036854775809}"#, "id"),
              (#"{"op":"observe","id":10,"object":"c","keyPath":"n","sinceRev":99999999999999999999}"#, "sinceRev"),
              (#"{"op":"batch","id":11,"ops":[{"op":"increment","object":"c","keyPath":"n","by":-9223372036854775809}]}"#, "ops"),
          ])
    func refusedNamingTheField(line: String, field: String) throws {
        let server = try KVODProcess()
        let connection = try server.connect()
        try connection.call("create", ["object": "c", "values": ["n": 5, "list": [1]]])
        let before = try connection.call("get", ["object": "c"]).filter { $0.key != "id" }
        let reply = try exchange(connection, line)
        expectEqual(reply["ok"], false)
        expectEqual(reply["error"]?["code"], "bad_request", "\(reply)")
        let message = reply["error"]?["message"]?.stringValue ?? ""
        #expect(message.hasPrefix("'\(field)': the integer "), "\(message)")
        #expect(message.contains("is outside the 64-bit range") && message.contains("never rounded"), "\(message)")
        // The line was not read: no id is echoed, as for any line that is not JSON.
        expectEqual(reply["id"], nil)
        // Nothing changed (value and revision), nothing was subscribed, and the connection keeps serving.
        expectEqual(try connection.call("get", ["object": "c"]).filter { $0.key != "id" }, before)
        expectEqual(try connection.request("get", ["object": "d"])["error"]?["code"], "not_found")
        try connection.call("ping")
        expectEqual(try connection.nextEvent(timeout: 0), nil)
    }

    @Test("64-bit integers stay exact, and the same large numbers written as doubles are doubles")
    func exactIntegersAndDoubles() throws {
        let server = try KVODProcess()
        let connection = try server.connect()
        try connection.call("create", ["object": "c", "values": ["n": 5]])
        // The issue's step, written as the double it would have become: a double, said so.
        let doubled = try exchange(connection, #"{"op":"increment","id":1,"object":"c","keyPath":"n","by":9.223372036854776e18}"#)
        #expect(doubled["ok"] == true && doubled["value"] == .double(9_223_372_036_854_775_808.0), "\(doubled)")
        for (text, expected) in [("9223372036854775807", JSONValue.int(.max)), ("-9223372036854775808", .int(.min)),
                                 ("1e20", .double(1e20)), ("1.8446744073709552e+19", .double(18_446_744_073_709_551_616.0))] {
            let set = try exchange(connection, #"{"op":"set","id":2,"object":"c","keyPath":"v","value":\#(text)}"#)
            expectEqual(set["ok"], true, "\(text): \(set)")
            let value = try connection.call("get", ["object": "c", "keyPath": "v"])["value"]
            expectEqual(value.map { strictlyEqualForTest($0, expected) }, true, "\(text) -> \(String(describing: value))")
        }
        // Int64's own bounds in an id come back exactly.
        let echoed = try exchange(connection, #"{"op":"ping","id":-9223372036854775808}"#)
        expectEqual(echoed["id"], .int(.min))
        // An increment at the top of the range is out_of_range, not a rounded double.
        try connection.call("set", ["object": "c", "keyPath": "i", "value": .int(.max)])
        expectEqual(try connection.request("increment", ["object": "c", "keyPath": "i", "by": 1])["error"]?["code"], "out_of_range")
    }
}

/// Equal and of the same kind (an integer is not a double of the same value).
private func strictlyEqualForTest(_ a: JSONValue, _ b: JSONValue) -> Bool {
    switch (a, b) {
    case let (.int(x), .int(y)): return x == y
    case let (.double(x), .double(y)): return x.bitPattern == y.bitPattern
    default: return a == b
    }
}
