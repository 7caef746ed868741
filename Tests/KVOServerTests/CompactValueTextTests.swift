import Testing
@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer
import KVOJSON

/// `JSONParser.Member.compactText` and `RequestDecoder.Decoded.valueText` (issue 13): a `set`'s value text
/// is kept as sent only when it is byte for byte what `JSONWriter` writes for the parsed value (otherwise the
/// decoder holds `JSONCanonicalizer`'s bytes, issue 44: `CanonicalizedValueTests`), because the
/// engine then reports those bytes as the value's size and events carry them instead of encoding the
/// value again. A wrong "compact" verdict would put different bytes in an event than the encoder would.
@Suite("Compact value text")
struct CompactValueTextTests {
    /// The compact text of `value` in `{"op":"set","object":"o","keyPath":"v","value":<text>}` as the parser
    /// reports it; also checks that `RequestDecoder` keeps exactly it.
    private func valueText(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) -> [UInt8]? {
        let line = Array(#"{"op":"set","object":"o","keyPath":"v","value":"#.utf8) + Array(text.utf8) + [UInt8(ascii: "}")]
        let members = line.withUnsafeBufferPointer { try? JSONParser.parseMembers($0) }
        guard let members, let member = members.last, member.key == "value" else {
            Issue.record("\(text) did not parse", sourceLocation: sourceLocation)
            return nil
        }
        let compact = member.compactText.map { Array(line[$0]) }
        let decoded = RequestDecoder.decode(line)
        // The decoder holds the value as JSONWriter's text in either case: the line's bytes when they are that
        // text, else JSONCanonicalizer's (issue 44).
        #expect(decoded.valueText == (compact ?? (try? encoding(text))), "\(text)", sourceLocation: sourceLocation)
        return compact
    }

    /// The parsed value of `text` and its encoding.
    private func encoding(_ text: String) throws -> [UInt8] {
        JSONWriter.bytes(try JSONParser.parse(text))
    }

    @Test("values written as JSONWriter writes them keep their text, byte for byte",
          arguments: [
              #""plain""#, #""""#, #""é ü 日本 😀""#, "\"del\u{7f}\"",
              "0", "7", "-12", "9223372036854775807", "-9223372036854775808", "true", "false", "null",
              "[]", "{}", "[1,2,[3,{}]]", #"{"a":1}"#, #"{"a":{"b":{"c":""}},"b":[true,null]}"#,
              #"{"h":"0123456789abcdef0123456789abcdef","m1":{"n":"xxx"},"m2":2}"#,
              #"{"A":1,"B":2,"a":3,"b":4}"#, #"{"":0,"a":1}"#, #"{"é":1,"日":2}"#,
          ])
    func compactTextIsKept(_ text: String) throws {
        let kept = try #require(valueText(text), "\(text) should have been kept")
        expectEqual(kept, Array(text.utf8))
        expectEqual(kept, (try encoding(text)), "\(text): the kept text must be what JSONWriter writes")
    }

    @Test("values JSONWriter would write otherwise are not kept as sent (the decoder holds JSONWriter's bytes)",
          arguments: [
              #"{"b":1,"a":2}"#,            // keys out of order
              #"{"a":1,"a":2}"#,            // a repeated key
              #"{"a": 1}"#, #"{ "a":1}"#, "[1, 2]", "[ ]", "{\n}",  // white space inside
              #""a\"b""#, #""a\/b""#, #""\u0041""#, #""line\nbreak""#,  // escapes
              "1.5", "1.0", "1e2", "-0", "0.0",  // non-integral numbers, -0
              #"{"a":{"d":1,"c":2}}"#,      // out of order one level down
              #"[{"b":1,"a":2}]"#,          // inside an array
              #"{"a\u0062":1}"#,            // an escaped key
          ])
    func otherTextIsNotKept(_ text: String) {
        expectEqual(valueText(text), nil, "\(text) must be encoded, not kept")
    }

    @Test("an integer past 64 bits is neither kept nor decoded: the request is refused (never rounded)")
    func integerPast64Bits() {
        let decoded = RequestDecoder.decode(Array(#"{"op":"set","object":"o","keyPath":"v","value":12345678901234567890}"#.utf8))
        expectEqual(decoded.valueText, nil)
        guard case let .failure(error) = decoded.request else {
            Issue.record("accepted: \(decoded.request)")
            return
        }
        #expect(error.code == .badRequest && error.message.hasPrefix("'value': the integer 12345678901234567890"), "\(error)")
    }

    @Test("white space around the value or between the request's members does not matter")
    func surroundingWhiteSpace() {
        let decoded = RequestDecoder.decode(Array(#"{ "op" : "set", "object":"o","keyPath":"v", "value" :  {"a":[1,2]} , "id":3 }"#.utf8))
        expectEqual(decoded.valueText, Array(#"{"a":[1,2]}"#.utf8))
    }

    @Test("only a set keeps its value's text; the last of repeated value members counts")
    func onlySets() {
        expectEqual(RequestDecoder.decode(Array(#"{"op":"insert","object":"o","keyPath":"v","index":0,"value":1}"#.utf8)).valueText, nil)
        let repeated = RequestDecoder.decode(Array(#"{"op":"set","object":"o","keyPath":"v","value":{"b":1},"value":[1]}"#.utf8))
        expectEqual(repeated.valueText, Array("[1]".utf8))
        expectEqual(repeated.request, .success(.set(object: "o", keyPath: try! KeyPath("v"), value: .decoded([1]))))
    }

    @Test("a set's event carries the same bytes whether the value came compact or not")
    func eventBytesDoNotDependOnTheRequestsForm() throws {
        let engine = KVOEngine()
        var notifications: [ChangeNotification] = []
        _ = try engine.create("o", values: ["v": ""], notifications: &notifications)
        _ = try engine.observe("o", keyPath: try KeyPath("v"), options: [.new], connection: ConnectionID(1),
                               notifications: &notifications)
        for (index, text) in [#"{"a":1,"b":[2,3]}"#, #"{"b":[2,3],"a":2}"#, #"{ "a" : 3 , "b":[2,3]}"#, "4.5", #""x\/y""#].enumerated() {
            let decoded = RequestDecoder.decode(Array(#"{"op":"set","object":"o","keyPath":"v","value":"#.utf8) + Array(text.utf8) + [0x7D])
            guard case let .success(.set(object, keyPath, requestValue)) = decoded.request else {
                Issue.record("\(text) did not decode")
                continue
            }
            let value = requestValue.value
            notifications.removeAll()
            _ = try engine.set(object, keyPath: keyPath, value: value, encoded: decoded.valueText, notifications: &notifications)
            let notification = try #require(notifications.first)
            // Compact or not, the request's value reaches the engine as JSONWriter's text (issue 44).
            expectEqual(notification.encodedNew, JSONWriter.bytes(value), "\(text)")
            var encoder = EventEncoder(notification)
            let line = encoder.line(subscription: 1, options: [.new])
            let event = try JSONParser.parse(line.dropLast().map { $0 })
            expectEqual(event["change"]?["new"], value)
            let expectedTail = Array(#""new":"#.utf8) + JSONWriter.bytes(value) + Array("}}\n".utf8)
            expectEqual(Array(line.suffix(expectedTail.count)), expectedTail, "\(text): \(String(decoding: line, as: UTF8.self))")
        }
    }
}
