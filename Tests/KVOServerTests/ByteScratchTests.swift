import Testing
import KVOJSON

/// `ByteScratch` (issue 28) writes exactly what `JSONWriter` writes, within the bound its callers state.
@Suite("ByteScratch")
struct ByteScratchTests {
    @Test("integers as JSONWriter writes them, at the edges of Int64 and UInt64")
    func integers() {
        let signed: [Int64] = [0, 1, -1, 9, 10, -10, 99, 1_000_000, Int64.max, Int64.min, Int64.min + 1]
        for value in signed {
            var buffer: [UInt8] = [0x78]
            ByteScratch.append(atMost: 21, to: &buffer) { $0.appendInteger(value) }
            var expected: [UInt8] = [0x78]
            JSONWriter.writeInteger(value, into: &expected)
            expectEqual(buffer, expected, "\(value)")
        }
        for value: UInt64 in [0, 7, UInt64(Int64.max) + 1, UInt64.max] {
            var buffer: [UInt8] = []
            ByteScratch.append(atMost: 21, to: &buffer) { $0.appendInteger(value) }
            expectEqual(String(decoding: buffer, as: UTF8.self), String(value))
        }
    }

    @Test("strings quoted and escaped as JSONWriter writes them, within quotedBound")
    func strings() {
        var random = SplitMix64(state: 28)
        let pieces = ["a", "é", "\"", "\\", "\n", "\u{1}", "\u{1F}", "€", "😀", "abcdefgh", "/", " ", "\u{7F}"]
        var cases = ["", "plain", String(repeating: "\u{1}", count: 17)]
        for _ in 0..<300 {
            cases.append((0..<Int.random(in: 0...20, using: &random)).map { _ in pieces.randomElement(using: &random)! }.joined())
        }
        for text in cases {
            let bound = ByteScratch.quotedBound(utf8Count: text.utf8.count)
            var buffer: [UInt8] = []
            ByteScratch.append(atMost: bound, to: &buffer) { $0.appendString(text) }
            var expected: [UInt8] = []
            JSONWriter.writeString(text, into: &expected)
            expectEqual(buffer, expected, "\(text.debugDescription)")
            #expect(expected.count <= bound, "\(text.debugDescription)")
        }
    }

    @Test("pieces append in order after what the buffer held")
    func pieces() {
        var buffer = Array("{".utf8)
        ByteScratch.append(atMost: 64, to: &buffer) { line in
            line.append("\"a\":")
            line.append(Array("[1,2]".utf8))
            line.append(UInt8(ascii: ","))
            line.appendRaw("\"b\":true")
            line.append("}")
            expectEqual(line.count, 19)
        }
        expectEqual(String(decoding: buffer, as: UTF8.self), #"{"a":[1,2],"b":true}"#)
    }
}
