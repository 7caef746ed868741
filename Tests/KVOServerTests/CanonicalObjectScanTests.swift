import Testing
import KVOJSON

/// `CanonicalObjectScan` says "canonical" only for text that `JSONWriter` writes back byte for byte
/// (the store's loader keeps such text packed without decoding it), and for the common objects it
/// does say so (or the loader would decode everything).
@Suite("canonical object scan")
struct CanonicalObjectScanTests {
    private func scan(_ text: String) -> Bool {
        CanonicalObjectScan.isCanonicalObject(Array(text.utf8))
    }

    @Test func acceptsWhatTheWriterWritesForOrdinaryObjects() {
        let objects: [JSONValue] = [
            [:],
            ["name": "object-1", "n": 1, "tags": ["a", "b"]],
            ["a": ["b": ["c": [1, [2, [3, ["d": "deep"]]]]]], "empty": [:], "list": []],
            ["n": .int(-123_456_789_012_345_678), "z": 0, "t": true, "f": false, "x": .null],
            ["text": "ключ 😀 名前 \u{7F} é", "A": 1, "B": 2, "a": 3, "_": 4, "a b": 5],
        ]
        for object in objects {
            let text = JSONWriter.bytes(object)
            #expect(CanonicalObjectScan.isCanonicalObject(text), "\(JSONWriter.string(object))")
        }
    }

    @Test func refusesTextTheWriterWouldWriteDifferentlyOrThatIsNotAnObject() {
        let refused = [
            "", "{", "}", "[]", "1", "\"a\"", "null", "{} ", " {}", "{}{}", "{\"a\":1} ",
            "{ \"a\":1}", "{\"a\": 1}", "{\"a\":1 }", "{\"a\":1,\"b\":2,}", "{\"a\":[1,]}", "{\"a\":[,1]}",
            "{\"b\":1,\"a\":2}", "{\"a\":1,\"a\":2}", "{\"ab\":1,\"a\":2}",
            "{\"a\":-0}", "{\"a\":01}", "{\"a\":-01}", "{\"a\":1.5}", "{\"a\":1e3}", "{\"a\":1E3}", "{\"a\":-}",
            "{\"a\":1234567890123456789}", "{\"a\":+1}", "{\"a\":tru}", "{\"a\":nul}", "{\"a\":truex}",
            "{\"a\":\"\\n\"}", "{\"a\":\"\\\"\"}", "{\"a\\\"\":1}", "{\"é\":1}", "{\"a\":\"x\ty\"}",
            "{\"a\":\"unterminated}", "{\"a\"1}", "{\"a\":}", "{a:1}", "{\"a\":[1}", "{\"a\":{\"b\":1]}",
        ]
        for text in refused { #expect(!scan(text), "\(text)") }
        // Invalid UTF-8 in a string: a lone continuation byte, an overlong form, a surrogate, past U+10FFFF, cut short.
        for bytes: [UInt8] in [[0x80], [0xC0, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xE2, 0x82], [0xFF]] {
            let text = Array("{\"a\":\"".utf8) + bytes + Array("\"}".utf8)
            #expect(!CanonicalObjectScan.isCanonicalObject(text), "\(bytes)")
        }
        // Nesting past the scan's depth is left to the parser.
        let deep = String(repeating: "[", count: CanonicalObjectScan.maximumDepth) + String(repeating: "]", count: CanonicalObjectScan.maximumDepth)
        #expect(!scan("{\"a\":\(deep)}"))
        let deepest = String(repeating: "[", count: CanonicalObjectScan.maximumDepth - 1) + String(repeating: "]", count: CanonicalObjectScan.maximumDepth - 1)
        #expect(scan("{\"a\":\(deepest)}"))
    }

    /// Whatever the scan accepts, among random objects and random damage to their text, parses and is
    /// written back as the same bytes.
    @Test func everythingAcceptedIsWrittenBackByteForByte() throws {
        var random = SplitMix64(state: 13)
        var accepted = 0
        for _ in 0..<3_000 {
            let object = Self.randomObject(&random)
            var text = JSONWriter.bytes(object)
            if Bool.random(using: &random) {
                // Damage: replace, insert or drop one byte.
                let position = Int.random(in: 0..<text.count, using: &random)
                let byte = Self.damageBytes.randomElement(using: &random)!
                switch Int.random(in: 0..<3, using: &random) {
                case 0: text[position] = byte
                case 1: text.insert(byte, at: position)
                default: text.remove(at: position)
                }
            }
            guard CanonicalObjectScan.isCanonicalObject(text) else { continue }
            accepted += 1
            let parsed = try JSONParser.parse(text)
            expectEqual(JSONWriter.bytes(parsed), text, "\(String(decoding: text, as: UTF8.self))")
        }
        #expect(accepted > 1_000, "most undamaged objects are canonical")
    }

    private static let damageBytes = Array("{}[]\":,-0123456789.eE \\ntfau".utf8) + [0x80, 0xC3, 0xA9, 0xF0, 0x00, 0x1F]

    /// A random object of the kinds the writer writes canonically (also for `PackedHistoryEntryTests`).
    static func randomObject(_ random: inout SplitMix64, depth: Int = 0) -> JSONValue {
        var members: [String: JSONValue] = [:]
        for _ in 0..<Int.random(in: 0...4, using: &random) {
            members[["a", "b", "ab", "B", "n", "name", "tags", "z9"].randomElement(using: &random)!] =
                randomValue(&random, depth: depth + 1)
        }
        return .object(members)
    }

    private static func randomValue(_ random: inout SplitMix64, depth: Int) -> JSONValue {
        switch Int.random(in: 0..<(depth > 3 ? 6 : 8), using: &random) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &random))
        case 2: return .int(Int64.random(in: -999_999_999_999_999_999...999_999_999_999_999_999, using: &random)
                            >> Int64.random(in: 0...62, using: &random))
        case 3: return .string(["", "a", "object-12", "é 😀 ключ", "\u{7F}"].randomElement(using: &random)!)
        case 4: return .int(Int64.random(in: -10...10, using: &random))
        case 5: return .string("v\(Int.random(in: 0...99, using: &random))")
        case 6: return .array((0..<Int.random(in: 0...3, using: &random)).map { _ in randomValue(&random, depth: depth + 1) })
        default: return randomObject(&random, depth: depth)
        }
    }
}
