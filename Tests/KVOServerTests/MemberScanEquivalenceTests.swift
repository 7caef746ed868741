import Testing
@testable import KVOServer
import KVOJSON

/// `JSONParser.scanMembers` (issue 28: the request decoder checks a line without building its values) against
/// `JSONParser.parseMembers`, which builds them: over random JSON texts and random corruptions of them, both
/// accept and reject the same inputs with the same error, and for an accepted object give the same members in
/// order, the same compact ranges, and values that parse to exactly what `parseMembers` built.
@Suite("Scanning a request's members without building them")
struct MemberScanEquivalenceTests {
    private static let keys = JSONParser.KeyTable(["op", "id", "object", "keyPath", "value", "values", "sinceRev", "abcdefghi", "o"])

    @Test("scanMembers and parseMembers agree on random texts and their corruptions", arguments: [1, 2, 3, 4, 5, 6] as [UInt64])
    func agreeOnRandomTexts(seed: UInt64) {
        var random = SplitMix64(state: seed &* 0x9E37_79B9)
        for round in 0..<1_500 {
            var text = Array(RandomJSONText.object(depth: 0, random: &random).utf8)
            if round % 3 != 0 { RandomJSONText.corrupt(&text, random: &random) }
            compare(text)
        }
    }

    @Test("fixed cases: errors, non-objects, escapes, key order, numbers, depth")
    func fixedCases() {
        let deep = String(repeating: "[", count: 300) + String(repeating: "]", count: 300)
        let cases = [
            #"{"op":"set","value":{"a":1,"b":[2,3]}}"#, #"{"value":{"b":1,"a":2}}"#, #"{"value":{"a":1,"a":2}}"#,
            #"{"value":{"é":1,"e":2}}"#, #"{"value":{"e":1,"é":2}}"#, #"{"value":"\u00e9"}"#, #"{"value":"\ud800"}"#,
            #"{"value":"\ud83d\ude00"}"#, #"{"value":-0}"#, #"{"value":1.0}"#, #"{"value":1e400}"#,
            #"{"value":123456789012345678901234567890}"#, #"{"value":01}"#, #"{"value":"a\tb"}"#, "{\"value\":\"\u{1}\"}",
            #"{"value":tru}"#, #"{"value":[1,]}"#, #"{"value":{"a":1,}}"#, #"{"a":1} x"#, #"[1,2]"#, #""op""#, "",
            "  {  }  ", #"{"value": [ 1 , 2 ] }"#, "{\"value\":\"\u{80}\"}", #"{"\u006fp":"set"}"#,
            "{\"value\":" + deep + "}", "{\"value\":" + String(repeating: "[", count: 255) + String(repeating: "]", count: 255) + "}",
            #"{"value":"abcdefghijklmnopqrstuvwxyz\"x"}"#, #"{"value":"abcdefgh"#, #"{"value":"\"#,
        ]
        for text in cases { compare(Array(text.utf8)) }
        compare([0x7B, 0x22, 0x61, 0x22, 0x3A, 0x22, 0xC3, 0x28, 0x22, 0x7D])  // invalid UTF-8 in a string
        compare([0x7B, 0xFF, 0x7D])
    }

    private func compare(_ text: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) {
        let shown = String(decoding: text, as: UTF8.self)
        text.withUnsafeBufferPointer { bytes in
            let parsed: Result<[JSONParser.Member]?, JSONParseError>
            do throws(JSONParseError) { parsed = .success(try JSONParser.parseMembers(bytes, keys: Self.keys)) } catch { parsed = .failure(error) }
            let scanned: Result<[JSONParser.MemberText]?, JSONParseError>
            do throws(JSONParseError) { scanned = .success(try JSONParser.scanMembers(bytes, keys: Self.keys)) } catch { scanned = .failure(error) }
            switch (parsed, scanned) {
            case let (.failure(expected), .failure(found)):
                #expect(expected == found, "\(shown)", sourceLocation: sourceLocation)
            case (.success(nil), .success(nil)):
                break
            case let (.success(members?), .success(spans?)):
                #expect(members.count == spans.count, "\(shown)", sourceLocation: sourceLocation)
                for (member, span) in zip(members, spans) {
                    #expect(member.key == span.key, "\(shown)", sourceLocation: sourceLocation)
                    #expect(member.compactText == (span.isCompact ? span.range : nil), "\(shown): \(member.key)",
                            sourceLocation: sourceLocation)
                    let value = try? JSONParser.parse(UnsafeBufferPointer(rebasing: bytes[span.range]))
                    #expect(value.map { strictlyEqual($0, member.value) } == true, "\(shown): \(member.key)",
                            sourceLocation: sourceLocation)
                }
            default:
                Issue.record("parseMembers \(parsed), scanMembers \(scanned) for \(shown)", sourceLocation: sourceLocation)
            }
        }
    }
}

/// Random JSON texts in the forms requests take and the forms that defeat the compact path: white space,
/// escapes, non-ASCII, keys out of order and repeated, numbers of every shape.
enum RandomJSONText {
    static func object(depth: Int, random: inout SplitMix64) -> String {
        let count = Int.random(in: 0...(depth == 0 ? 6 : 3), using: &random)
        let names = ["op", "id", "value", "a", "b", "é", "keyPath", "zz", "object", "values", "a\\u0062", "", "sinceRev", "sinceRevs", "abcdefghi", "o", "o\\\"", "sinceRe\\u0076"]
        let members = (0..<count).map { _ in
            let name = names.randomElement(using: &random)!
            return space(&random) + "\"" + name + "\"" + space(&random) + ":" + space(&random) + value(depth: depth + 1, random: &random)
        }
        return "{" + members.joined(separator: space(&random) + "," + space(&random)) + space(&random) + "}"
    }

    static func value(depth: Int, random: inout SplitMix64) -> String {
        let kind = Int.random(in: 0..<(depth > 4 ? 6 : 8), using: &random)
        switch kind {
        case 0: return ["null", "true", "false"].randomElement(using: &random)!
        case 1, 2:
            return ["0", "-0", "7", "-12", "1.5", "1e3", "-2.5E-3", "9223372036854775807", "-9223372036854775808",
                    "9223372036854775808", "1e400", "0.0", "100"].randomElement(using: &random)!
        case 3, 4, 5:
            return "\"" + ["", "abc", "é", "a b", "\\n", "\\\"", "\\u00e9", "\\ud83d\\ude00", "0123456789abcdefghij",
                           "€uro", "\\/", "x\\\\y"].randomElement(using: &random)! + "\""
        case 6: return object(depth: depth, random: &random)
        default:
            let count = Int.random(in: 0...3, using: &random)
            return "[" + (0..<count).map { _ in value(depth: depth + 1, random: &random) }.joined(separator: space(&random) + ",") + "]"
        }
    }

    private static func space(_ random: inout SplitMix64) -> String {
        Int.random(in: 0..<6, using: &random) == 0 ? [" ", "\n", "\t ", "\r\n"].randomElement(using: &random)! : ""
    }

    /// One to three random edits: a byte deleted, replaced or inserted (ASCII punctuation, a digit, a quote,
    /// a backslash, a control character or a byte that starts no UTF-8 sequence).
    static func corrupt(_ text: inout [UInt8], random: inout SplitMix64) {
        let replacements: [UInt8] = Array("{}[]:,\"\\0-e.tn x".utf8) + [0x01, 0xFF, 0xC3, 0x80]
        for _ in 0..<Int.random(in: 1...3, using: &random) {
            guard !text.isEmpty else { return }
            let position = Int.random(in: 0..<text.count, using: &random)
            switch Int.random(in: 0..<3, using: &random) {
            case 0: text.remove(at: position)
            case 1: text[position] = replacements.randomElement(using: &random)!
            default: text.insert(replacements.randomElement(using: &random)!, at: position)
            }
        }
    }
}
