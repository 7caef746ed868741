import Testing
@testable import KVOEngine
@testable import KVOServer
@testable import KVOJSON

/// `JSONCanonicalizer` (issue 44): a `set`'s value written the way clients write it (keys in insertion order,
/// escapes, `1e3`, `-0`, white space) becomes exactly the bytes `JSONWriter` writes for the parsed value, which
/// is what the decoded path stored, sent and recorded before; and `CanonicalText.hasSameValue` keeps `JSONValue ==`
/// (`1 == 1.0`, canonically equivalent strings equal, key order not significant) for every text it may now hold.
@Suite("Canonicalizing a set's value")
struct CanonicalizedValueTests {
    /// What the decoded path wrote for `text`: `JSONWriter`'s encoding of the parsed value.
    private func writerBytes(_ text: String) throws -> [UInt8] {
        JSONWriter.bytes(try JSONParser.parse(text, wideIntegers: .refused))
    }

    private func canonical(_ text: String) -> [UInt8]? {
        Array(text.utf8).withUnsafeBufferPointer { JSONCanonicalizer.canonicalText(of: $0) }
    }

    @Test("client forms become JSONWriter's bytes", arguments: [
        // Key order (insertion order, reversed, nested, inside arrays), repeated keys (the last value counts).
        (#"{"b":1,"a":2}"#, #"{"a":2,"b":1}"#),
        (#"{"t":1,"s":"x","p":[3]}"#, #"{"p":[3],"s":"x","t":1}"#),
        (#"{"z":{"y":1,"x":[{"b":1,"a":0}]},"a":null}"#, #"{"a":null,"z":{"x":[{"a":0,"b":1}],"y":1}}"#),
        (#"{"a":1,"a":2}"#, #"{"a":2}"#),
        (#"{"b":0,"a":1,"b":2,"a":3}"#, #"{"a":3,"b":2}"#),
        (#"{"B":1,"a":2,"A":3,"":4}"#, #"{"":4,"A":3,"B":1,"a":2}"#),
        (#"{"ab":1,"a":2,"abc":3}"#, #"{"a":2,"ab":1,"abc":3}"#),
        (#"{"\u0062":1,"\u0061":2}"#, #"{"a":2,"b":1}"#),
        (#"{"é":1,"e":2,"f":3}"#, #"{"e":2,"f":3,"é":1}"#),
        // Numbers: non-integral ones as Double.description, -0 as 0.
        ("1.0", "1.0"), ("1e3", "1000.0"), ("1E3", "1000.0"), ("-0.0", "-0.0"), ("-0", "0"), ("2.50", "2.5"),
        ("1e-7", "1e-07"), ("1e22", "1e+22"), ("0.1", "0.1"), ("-1.5e300", "-1.5e+300"), ("5e-324", "5e-324"),
        ("1.7976931348623157e308", "1.7976931348623157e+308"), ("9223372036854775807", "9223372036854775807"),
        ("-9223372036854775808", "-9223372036854775808"), ("[1.0,1,-0,0.0]", "[1.0,1,0,0.0]"),
        // Decimals copied as they are (already Double.description) and their neighbours that are not.
        ("0.1", "0.1"), ("0.25", "0.25"), ("51.5074", "51.5074"), ("-3.75", "-3.75"), ("100.0", "100.0"),
        ("123456789012.345", "123456789012.345"), ("999999999999999.0", "999999999999999.0"), ("0.999999999999999", "0.999999999999999"),
        ("0.05", "0.05"), ("0.0001", "0.0001"), ("0.00001", "1e-05"), ("0.1000", "0.1"), ("1234567890123456.5", "1234567890123456.5"),
        ("0.1234567890123456", "0.1234567890123456"), ("9007199254740993.0", "9007199254740992.0"), ("1e16", "1e+16"),
        // Escapes: decoded, and written again only where JSON needs them (as JSONWriter does).
        (#""\u00e9""#, #""é""#), (#""\/""#, #""/""#), (#""\ud83d\ude00""#, "\"😀\""), (#""\u001F\u0000""#, #""\u001f\u0000""#),
        (#""\u0022\u005c""#, #""\"\\""#), (#""a\tb\n\r\b\f""#, #""a\tb\n\r\b\f""#), (#""caf\u00e9 \/ xxxxxxxxxxxxxxxx""#, #""café / xxxxxxxxxxxxxxxx""#),
        (#""e\u0301""#, "\"e\u{301}\""), ("\"del\u{7f}\"", "\"del\u{7f}\""),
        // White space anywhere.
        (" { \"b\" : [ 1 , 2 ] ,\n\t\"a\" : { } } ", #"{"a":{},"b":[1,2]}"#), ("[ ]", "[]"), ("{\r\n}", "{}"),
        // What is canonical already stays as it is.
        (#"{"h":"0123456789abcdef0123456789abcdef","m1":{"n":"xxx"},"m2":2}"#, #"{"h":"0123456789abcdef0123456789abcdef","m1":{"n":"xxx"},"m2":2}"#),
        ("true", "true"), ("false", "false"), ("null", "null"), (#""""#, #""""#),
    ])
    func clientForms(_ text: String, _ expected: String) throws {
        let written = try #require(canonical(text), "\(text) should be canonicalized")
        expectEqual(String(decoding: written, as: UTF8.self), expected, "\(text)")
        expectEqual(written, try writerBytes(text), "\(text): the decoded path wrote other bytes")
    }

    @Test("objects of many members, deep nesting and long strings")
    func largeValues() throws {
        let keys = (0..<40).map { "k\($0)" }
        let reversed = "{" + keys.reversed().map { "\"\($0)\":\($0.count)" }.joined(separator: ",") + "}"
        expectEqual(canonical(reversed), try writerBytes(reversed))
        // 255 levels (the parser's limit is 256), each an object with two members out of order.
        var deep = "0"
        for level in 0..<255 { deep = "{\"z\":\(deep),\"a\":\(level)}" }
        expectEqual(canonical(deep), try writerBytes(deep))
        let long = "\"" + String(repeating: "abc\\u00e9\\/\\\"", count: 3_000) + "\""
        expectEqual(canonical(long), try writerBytes(long))
        // Output longer than the input (every `1e9` is `1000000000.0`): the second, larger room.
        let growing = "[" + Array(repeating: "1e9", count: 200).joined(separator: ",") + "]"
        expectEqual(canonical(growing), try writerBytes(growing))
    }

    @Test("what only the tree can tell is left to it", arguments: [
        #"{"a\"":1}"#, #"{"\u0001":1}"#, #"{"b":1,"a\\":2}"#,  // a key that canonical form escapes
        #"{"é":1,"e\u0301":2}"#, "{\"é\":1,\"e\u{301}\":2}",  // canonically equivalent keys: one key
    ])
    func leftToTheTree(_ text: String) throws {
        expectEqual(canonical(text), nil, "\(text)")
        // The request decoder then decodes it, as before issue 44.
        let decoded = RequestDecoder.decode(Array(#"{"op":"set","object":"o","keyPath":"v","value":"#.utf8) + Array(text.utf8) + [0x7D])
        expectEqual(decoded.valueText, nil)
        guard case let .success(.set(_, _, value)) = decoded.request else {
            Issue.record("\(text) did not decode: \(decoded.request)")
            return
        }
        #expect(strictlyEqual(value.value, try JSONParser.parse(text)), "\(text)")
    }

    @Test("random values in every form: the canonical text is JSONWriter's", arguments: [11, 12, 13, 14] as [UInt64])
    func randomValues(seed: UInt64) throws {
        var random = SplitMix64(state: seed &* 0x9E37_79B9)
        var canonicalized = 0
        for _ in 0..<2_000 {
            let text = RandomJSONText.value(depth: 1, random: &random)
            let bytes = Array(text.utf8)
            guard let value = try? JSONParser.parse(bytes, wideIntegers: .refused) else { continue }  // requests refuse it
            guard let written = bytes.withUnsafeBufferPointer({ JSONCanonicalizer.canonicalText(of: $0) }) else { continue }
            canonicalized += 1
            expectEqual(written, JSONWriter.bytes(value), "\(text)")
            #expect(strictlyEqual(try JSONParser.parse(written), value), "\(text)")
        }
        #expect(canonicalized > 1_000, "most random values are canonicalized, not left to the tree: \(canonicalized)")
    }

    @Test("a set request holds a client-form value as JSONWriter's text", arguments: [
        #"{"b":[2,3],"a":2}"#, #"{ "a" : 3 }"#, "4.5", "1e3", "-0", #""x\/y""#, #""\u00e9""#, #"[{"y":1.0,"x":-0.0}]"#,
    ])
    func requestsHoldText(_ text: String) throws {
        let decoded = RequestDecoder.decode(Array(#"{"op":"set","object":"o","keyPath":"v","value":"#.utf8) + Array(text.utf8) + [0x7D])
        expectEqual(decoded.valueText, try writerBytes(text), "\(text)")
        guard case let .success(.set(_, _, value)) = decoded.request else {
            Issue.record("\(text) did not decode: \(decoded.request)")
            return
        }
        #expect(strictlyEqual(value.value, try JSONParser.parse(text)), "\(text)")
    }

    @Test("bad values are refused as before, with the same errors", arguments: [
        "{\"a\":1,}", "[1,]", "01", "1e400", "12345678901234567890", #""\ud800""#, "\"\u{1}\"", "tru", #"{"a" 1}"#,
        String(repeating: "[", count: 300) + String(repeating: "]", count: 300),
    ])
    func badValuesRefused(_ text: String) {
        let decoded = RequestDecoder.decode(Array(#"{"op":"set","object":"o","keyPath":"v","value":"#.utf8) + Array(text.utf8) + [0x7D])
        guard case let .failure(error) = decoded.request else {
            Issue.record("accepted \(text): \(decoded.request)")
            return
        }
        expectEqual(error.code, .badRequest, "\(text)")
        expectEqual(decoded.valueText, nil)
    }

    // MARK: - Equality of canonical texts

    private func text(_ json: String) throws -> CanonicalText {
        CanonicalText(trusting: try writerBytes(json))
    }

    @Test("equal values with different bytes are equal; the bytes alone prove the rest different", arguments: [
        ("1", "1.0", true), ("0", "-0.0", true), ("0.0", "-0.0", true), ("[1,2]", "[1.0,2.0]", true),
        (#"{"a":1,"b":"x"}"#, #"{"b":"x","a":1.0}"#, true), ("1000", "1e3", true), ("1000000000000000000", "1e18", true),
        ("\"é\"", "\"e\u{301}\"", true), ("{\"k\":\"é\"}", "{\"k\":\"e\u{301}\"}", true), ("{\"é\":1}", "{\"e\u{301}\":1.0}", true),
        ("1", "2", false), ("1", "1.5", false), ("[1,2]", "[1,3]", false), (#""v1.2""#, #""v1.3""#, false),
        ("\"é1\"", "\"é2\"", false), ("\"é\"", "\"e\"", false), (#"{"a":1}"#, #"{"b":1}"#, false), ("null", "false", false),
        (#"{"a":"1.0"}"#, #"{"a":1.0}"#, false), ("12", "12.5", false), ("-1", "1", false), ("[]", "{}", false),
    ])
    func textEquality(_ left: String, _ right: String, _ equal: Bool) throws {
        let leftText = try text(left)
        let rightText = try text(right)
        expectEqual(try JSONParser.parse(left) == JSONParser.parse(right), equal, "the test's own claim: \(left) \(right)")
        expectEqual(leftText.hasSameValue(as: rightText), equal, "\(left) \(right)")
        expectEqual(rightText.hasSameValue(as: leftText), equal, "\(right) \(left)")
    }

    @Test("the bytes decide without decoding where they can")
    func byteVerdicts() throws {
        func verdict(_ left: String, _ right: String) throws -> Bool? {
            let leftBytes = try writerBytes(left)
            let rightBytes = try writerBytes(right)
            return leftBytes.withUnsafeBufferPointer { l in rightBytes.withUnsafeBufferPointer { r in CanonicalText.byteVerdict(l, r) } }
        }
        expectEqual(try verdict(#"{"a":"x","b":[1,2]}"#, #"{"a":"x","b":[1,2]}"#), true)
        expectEqual(try verdict(#"{"a":"é1","b":2}"#, #"{"a":"é2","b":2}"#), false)  // non-ASCII elsewhere
        expectEqual(try verdict(#"{"h":"00ab","p":2.5}"#, #"{"h":"00ac","p":2.5}"#), false)  // a float elsewhere
        expectEqual(try verdict("[123,4]", "[124,4]"), false)
        // Digits and `e` inside a string (hex) are no number: only a run where a number can start counts.
        expectEqual(try verdict(#"{"h":"00001e3a1e5","v":1}"#, #"{"h":"00001e3b1e5","v":1}"#), false)
        expectEqual(try verdict(#""0001e4""#, #""0001e5""#), false)
        expectEqual(try verdict("[1,2.5]", "[1,2.6]"), nil)
        expectEqual(try verdict("1", "1.0"), nil)
        expectEqual(try verdict("0", "-0.0"), nil)
        expectEqual(try verdict("\"é\"", "\"e\u{301}\""), nil)
    }

    @Test("random pairs of values: text equality is JSONValue ==", arguments: [21, 22] as [UInt64])
    func randomPairs(seed: UInt64) throws {
        var random = SplitMix64(state: seed &* 0x9E37_79B9)
        let numbers = ["1", "1.0", "0", "-0.0", "0.0", "2", "1e3", "1000", "\"é\"", "\"e\u{301}\"", "\"e\"", "\"1.0\""]
        for _ in 0..<3_000 {
            // Values built of few parts, so that many pairs are equal.
            func small(_ depth: Int) -> String {
                switch Int.random(in: 0..<(depth > 2 ? 1 : 3), using: &random) {
                case 0: return numbers.randomElement(using: &random)!
                case 1: return "[" + small(depth + 1) + "," + small(depth + 1) + "]"
                default: return "{\"a\":" + small(depth + 1) + ",\"b\":" + small(depth + 1) + "}"
                }
            }
            let left = small(0)
            let right = small(0)
            let expected = try JSONParser.parse(left) == JSONParser.parse(right)
            expectEqual(try text(left).hasSameValue(as: text(right)), expected, "\(left) \(right)")
        }
    }

    @Test("nesting depth read from a text skips escaped quotes")
    func nestingDepthWithEscapes() throws {
        expectEqual(try text(#""\"[[[[""#).nestingDepth(upTo: 10), 0)
        expectEqual(try text(#"["\"",[1,"\\"],{"a\"[":[[]]}]"#).nestingDepth(upTo: 10), 4)
        expectEqual(try text(#"[["\\\""]]"#).nestingDepth(upTo: 10), 2)
    }
}
