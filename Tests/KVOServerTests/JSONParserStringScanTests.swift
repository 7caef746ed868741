import Testing
@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer
import KVOJSON

/// The string scan skips eight plain ASCII bytes at a time: every special byte must still be found
/// wherever it falls relative to those eight-byte steps, and in the last bytes before the end.
@Suite("JSONParser string scan")
struct JSONParserStringScanTests {
    @Test func specialBytesAreFoundAtEveryOffset() throws {
        for length in 0..<40 {
            for position in 0...length {
                let before = String(repeating: "a", count: position)
                let after = String(repeating: "b", count: length - position)
                // An escaped quote and backslash, a two-byte and a four-byte sequence.
                for (encoded, decoded) in [(#"\""#, "\""), (#"\\"#, "\\"), ("é", "é"), ("🎈", "🎈"), ("~", "~"), ("\u{7F}", "\u{7F}")] {
                    let value = try JSONParser.parse("\"\(before)\(encoded)\(after)\"")
                    #expect(strictlyEqual(value, .string(before + decoded + after)), "length \(length) at \(position)")
                }
                // A raw control character, a lone continuation byte, and an unterminated string.
                let control = Array("\"\(before)".utf8) + [0x1F] + Array("\(after)\"".utf8)
                #expect(isSyntaxError(parseError(control)), "control at \(position) of \(length)")
                let invalid = Array("\"\(before)".utf8) + [0x80] + Array("\(after)\"".utf8)
                expectEqual(parseError(invalid)?.reason, .invalidUTF8, "0x80 at \(position) of \(length)")
                #expect(isSyntaxError(parseError("\"\(before)\(after)")), "unterminated, \(length)")
                // The closing quote ends the string, with more input after it.
                let object = try JSONParser.parse("{\"k\":\"\(before)\",\"x\":\"\(after)\"}")
                #expect(strictlyEqual(object, .object(["k": .string(before), "x": .string(after)])))
            }
        }
    }
}

/// `parseMembers(_:keys:)` takes known keys from its table instead of building them: the members
/// must be the same as without the table, whatever the key's length, escapes or bytes.
@Suite("JSONParser key table")
struct JSONParserKeyTableTests {
    private static let table = JSONParser.KeyTable(["op", "id", "keyPath", "sinceRev", "x", "", "longerThan8"])

    private func members(_ text: String, keys: JSONParser.KeyTable?) throws -> [String] {
        let bytes = Array(text.utf8)
        let parsed = try bytes.withUnsafeBufferPointer { buffer in try JSONParser.parseMembers(buffer, keys: keys) }
        return try #require(parsed).map(\.key)
    }

    @Test func keysAreTheSameWithAndWithoutTheTable() throws {
        let keys = ["op", "id", "keyPath", "sinceRev", "sinceRevs", "sinceRe", "x", "", "longerThan8", "o", "opp",
                    #"o\u0070"#, #"\"op"#, "é", "op\u{7F}", "ke\\nyPath", "keyPatH"]
        for key in keys {
            let text = "{ \"\(key)\" : 1, \"\(key)\":[\"\(key)\"]}"
            let expected = try members(text, keys: nil)
            expectEqual(try members(text, keys: Self.table), expected, "key \(key)")
        }
        expectEqual(try members(#"{"o\u0070":1}"#, keys: Self.table), ["op"])
    }

    @Test func malformedKeysStillFail() {
        for text in [#"{"op"#, #"{"op:1}"#, "{\"o\u{1}\":1}", #"{"keyPath"#, "{\"id\"\u{0}:1}"] {
            let bytes = Array(text.utf8)
            #expect(throws: JSONParseError.self, "\(text)") {
                _ = try bytes.withUnsafeBufferPointer { try JSONParser.parseMembers($0, keys: Self.table) }
            }
        }
    }
}
