import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Issue 13: a `set` whose value arrives exactly as kvod writes JSON (compact, keys sorted, no escapes,
/// integers) has its text sent on in events instead of being encoded again. Whatever form the value
/// came in, every observer's event must carry kvod's own encoding of it, and the stored value (`get`)
/// must be the same: the request's text may be reused only when it is that encoding.
@Suite("set value text over TCP")
struct SetValueTextOverTCPTests {
    @Test("events carry kvod's encoding of the value, whatever form the request gave it in")
    func eventsCarryTheCanonicalEncoding() throws {
        let server = try KVODProcess()
        let writer = try server.connect()
        let observer = try server.connect()
        try writer.call("create", ["object": "o", "values": ["v": "", "a": ["b": ["c": ""]]]])
        try observer.call("observe", ["object": "o", "keyPath": "v", "options": ["new", "old"]])
        try observer.call("observe", ["object": "o", "keyPath": "a.b.c", "options": ["new"]])
        try observer.call("observe", ["object": "o", "keyPath": "a", "options": ["new"]])
        // Each differs from the one before it (an unchanged value sends no event).
        let values = [
            #"{"h":"0123456789abcdef","m1":{"n":"xxx"},"m2":2}"#,   // compact and sorted: its text is kept
            #"{"m2":3,"h":"0123456789abcdef","m1":{"n":"xxx"}}"#,   // unsorted
            #"{"h": "x", "m1" : [1, 2]}"#,                          // white space
            #"{"h":"a\"b\/c\u00e9\n","z":[1.5,-0,1e2,10]}"#,        // escapes, numbers written otherwise
            #"[{"b":1,"a":[]},{},[]]"#, #"[1,2,3]"#, #""plain""#, "12", #"{"a":{"a":{"a":{}}}}"#,
        ]
        var id = 0
        for keyPath in ["v", "a.b.c"] {
            for text in values {
                id += 1
                let line = #"{"id":\#(id),"op":"set","object":"o","keyPath":"\#(keyPath)","value":\#(text)}"#
                try writer.send(raw: Array(line.utf8) + [0x0A])
                let reply = try writer.readMessage()
                #expect(reply["ok"] == true && reply["id"] == .int(Int64(id)), "\(line): \(reply)")
                let expected = JSONWriter.bytes(try JSONParser.parse(text))
                // One event per observation that reads the written location: `v` alone, or `a.b.c` and `a`.
                for observed in keyPath == "v" ? ["v"] : ["a.b.c", "a"] {
                    let event = try observer.readLine()
                    let message = try JSONParser.parse(event)
                    expectEqual(message["keyPath"], .string(observed), "\(String(decoding: event, as: UTF8.self))")
                    guard observed != "a" else {
                        expectEqual(message["change"]?["new"]?["b"]?["c"], (try JSONParser.parse(text)))
                        continue
                    }
                    let newText = Array(#""new":"#.utf8) + expected
                    let tail = Array(event.suffix(newText.count + 2))
                    #expect(tail == newText + Array("}}".utf8) || event.contains(newText),
                            "\(text) at \(keyPath): \(String(decoding: event, as: UTF8.self))")
                    #expect(String(decoding: event, as: UTF8.self).contains(String(decoding: newText, as: UTF8.self)),
                            "\(text) at \(keyPath): the event must carry kvod's encoding \(String(decoding: expected, as: UTF8.self))")
                }
                let stored = try writer.call("get", ["object": "o", "keyPath": .string(keyPath)])
                expectEqual(stored["value"], (try JSONParser.parse(text)), "\(text)")
            }
        }
        try observer.call("ping")
        #expect(observer.pendingEvents.isEmpty)
    }
}

private extension Array where Element == UInt8 {
    func contains(_ part: [UInt8]) -> Bool {
        guard part.count <= count else { return false }
        return (0...(count - part.count)).contains { Array(self[$0..<($0 + part.count)]) == part }
    }
}
