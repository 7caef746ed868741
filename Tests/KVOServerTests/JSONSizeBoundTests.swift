import KVOJSON
import Testing

/// `JSONSizeBound`: never below what `JSONWriter` writes, and stops at the limit.
@Suite struct JSONSizeBoundTests {
    private let samples: [JSONValue] = [
        .null, true, false, 0, -1, 1234567890, .int(.min), .int(.max), 1.5, -2.5e-300, .double(.greatestFiniteMagnitude),
        "", "plain", "quote\" back\\slash", "control \u{0}\u{1}\u{1F}\n\t\r", "é日本🎉",
        [], [1, 2, 3], [:], ["a": 1, "b": [true, .null, "x"]], [["deep": [[["er": "\u{7}"]]]]],
    ]

    @Test func theBoundIsNeverBelowTheEncoding() {
        for value in samples {
            let written = JSONWriter.bytes(value).count
            let bound = JSONSizeBound.of(value, limit: .max / 2)
            #expect(bound != nil && bound! >= written, "\(value): bound \(String(describing: bound)), written \(written)")
            // Exact but for doubles and control characters.
            if !"\(value)".contains(".") && !"\(value)".contains("\\u") && !"\(value)".contains("e") {
                expectEqual(bound, written, "\(value)")
            }
        }
    }

    @Test func aValuePastTheLimitStopsEarly() {
        let big = JSONValue.string(String(repeating: "x", count: 1_000_000))
        expectEqual(JSONSizeBound.of(big, limit: 1000), nil)
        expectEqual(JSONSizeBound.of(big, limit: 1_000_002), 1_000_002)
        let many = JSONValue.array(Array(repeating: "abc", count: 100_000))
        expectEqual(JSONSizeBound.of(many, limit: 10_000), nil)
        expectEqual(JSONSizeBound.of(many, limit: 700_001), JSONWriter.bytes(many).count)
        expectEqual(JSONSizeBound.ofString("a\"b", limit: 5), nil)
        expectEqual(JSONSizeBound.ofString("a\"b", limit: 6), 6)
    }
}
