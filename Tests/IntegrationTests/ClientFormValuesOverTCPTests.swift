import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Values written as clients write them (issue 44: keys in insertion order, escapes, `1e3`, `-0.0`, deep nesting),
/// set over TCP on the real kvod: the event, a `get`, history replayed after a restart and the object reloaded
/// from the store all carry exactly what the decoded path gave before, `JSONWriter`'s encoding of the parsed
/// value; a value equal to the current one (`1 == 1.0`, NFC and NFD strings, key order) is no change; and bad
/// values are refused with the connection still serving.
@Suite("client-form values over TCP")
struct ClientFormValuesOverTCPTests {
    private static let values = [
        // No two neighbours equal (an equal value is no change, so no event); no newline (it would end the line).
        #"{"t":1,"s":"x","p":[3,{"b":2,"a":1}]}"#, #"{"a":1,"a":2}"#, "-0", "1.0", "1e3", "-0.0", "1E-7",
        #""caf\u00e9 \/ \ud83d\ude00 \u001f \" \\""#, #"{"z":{"y":[1.5,-2.5e-3]},"é":"\u00e9","e":"e\u0301"}"#,
        " { \"b\" : [ 1 , 2 ] ,\t\"a\" : { } } ", "9223372036854775807", "1.7976931348623157e308",
        String(repeating: #"{"z":0,"a":"#, count: 100) + "1" + String(repeating: "}", count: 100),
    ]

    /// What the decoded path wrote for `text`.
    private func writerBytes(_ text: String) throws -> [UInt8] {
        JSONWriter.bytes(try JSONParser.parse(text, wideIntegers: .refused))
    }

    /// Sends `{"id":…,"op":"set","object":"o","keyPath":keyPath,"value":text}` as raw bytes; returns the reply.
    private func set(_ connection: KVOConnection, _ keyPath: String, _ text: String, id: Int) throws -> JSONValue {
        let line = #"{"id":\#(id),"op":"set","object":"o","keyPath":"\#(keyPath)","value":"# + text + "}\n"
        try connection.send(raw: Array(line.utf8))
        while true {
            let message = try connection.readMessage()
            if message["id"] == .int(Int64(id)) { return message }
        }
    }

    @Test("events, gets, replayed history and reloaded objects carry JSONWriter's bytes")
    func storedSentAndReloaded() throws {
        let directory = try TemporaryDirectory("client-forms")
        let server = try KVODProcess(["--sync", "normal"], dataDirectory: directory.appending("data"))
        let writer = try server.connect()
        try writer.call("create", ["object": "o", "values": ["v": ""]])
        let subscriber = try server.connect()
        let observed = try subscriber.observe(object: "o", keyPath: "v")
        for (index, text) in Self.values.enumerated() {
            let reply = try set(writer, "v", text, id: index + 1)
            expectEqual(reply["ok"], true, "\(text): \(reply)")
            let line = try subscriber.readLine()
            let expected = Array(#""new":"#.utf8) + (try writerBytes(text)) + Array("}}".utf8)
            expectEqual(String(decoding: line.suffix(expected.count), as: UTF8.self), String(decoding: expected, as: UTF8.self),
                        "\(text): the event")
            let got = try writer.call("get", ["object": "o", "keyPath": "v"])["value"]
            expectEqual(got.map(JSONWriter.bytes), try writerBytes(text), "\(text): get")
            _ = try set(writer, "k\(index)", text, id: 1_000 + index)
        }
        let restarted = try server.restart(after: SIGTERM)
        let reader = try restarted.connect()
        let object = try #require(try reader.call("get", ["object": "o"])["value"])
        for (index, text) in Self.values.enumerated() {
            expectEqual(object["k\(index)"].map(JSONWriter.bytes), try writerBytes(text), "\(text): reloaded")
        }
        // History replayed from the store: every change to `v` again, with the same value (written again by
        // JSONWriter to compare: `1.0` is not `1`, `-0.0` not `0.0`, and strings compare byte for byte).
        let replaying = try restarted.connect()
        try replaying.observe(object: "o", keyPath: "v", sinceRev: try #require(observed.rev))
        for text in Self.values {
            let event = try #require(try replaying.nextEvent(), "\(text): not replayed")
            expectEqual(event["change"]?["new"].map(JSONWriter.bytes), try writerBytes(text), "\(text): replayed")
        }
    }

    @Test("a value equal to the current one is no change, however it is written", arguments: [
        (#"{"a":1,"b":"é"}"#, "{\"b\":\"e\\u0301\",\"a\":1.0}"), ("1", "1.0"), ("0", "-0.0"), ("1000", "1e3"),
        (#"[{"x":"\u00e9"}]"#, "[{\"x\":\"é\"}]"), (#""a/b""#, #""a\/b""#),
    ])
    func equalValuesAreNoChange(_ first: String, _ second: String) throws {
        let server = try KVODProcess()
        let writer = try server.connect()
        try writer.call("create", ["object": "o", "values": ["v": ""]])
        let subscriber = try server.connect()
        try subscriber.observe(object: "o", keyPath: "v")
        expectEqual(try set(writer, "v", first, id: 1)["ok"], true)
        let firstEvent = try #require(try subscriber.nextEvent())
        expectEqual(firstEvent["change"]?["new"].map(JSONWriter.bytes), try writerBytes(first))
        expectEqual(try set(writer, "v", second, id: 2)["ok"], true)
        expectEqual(try set(writer, "v", #""after""#, id: 3)["ok"], true)
        // The next event is the third set's: the second changed nothing.
        let next = try #require(try subscriber.nextEvent())
        expectEqual(next["change"]?["new"], "after", "\(second) after \(first) was reported as a change: \(next)")
    }

    @Test("bad values are refused clearly and change nothing; the connection keeps serving", arguments: [
        "{\"b\":1,\"a\":2,}", "[1.0,]", "1e400", "12345678901234567890", #""\ud800""#, "01",
        String(repeating: "[", count: 300) + String(repeating: "]", count: 300),
    ])
    func badValuesRefused(_ text: String) throws {
        let server = try KVODProcess()
        let writer = try server.connect()
        try writer.call("create", ["object": "o", "values": ["v": 1]])
        // A line that is not valid JSON has no id to echo: the next message is its reply.
        try writer.send(raw: Array((#"{"id":1,"op":"set","object":"o","keyPath":"v","value":"# + text + "}\n").utf8))
        let reply = try writer.readMessage()
        expectEqual(reply["ok"], false, "\(text): \(reply)")
        expectEqual(reply["error"]?["code"], "bad_request", "\(text): \(reply)")
        expectEqual(try writer.call("get", ["object": "o", "keyPath": "v"])["value"], 1)
    }
}
