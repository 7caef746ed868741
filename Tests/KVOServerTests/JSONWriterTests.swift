import Testing
@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer
import KVOJSON

/// Random JSON values with the awkward cases over-represented.
private struct ValueGenerator {
    var rng: SplitMix64

    static let scalars: [Unicode.Scalar] = {
        var pool: [Unicode.Scalar] = Array("abcXYZ019 _.:,{}[]".unicodeScalars)
        pool += ["\"", "\\", "/", "\u{7F}", "é", "€", "😀", "\u{10FFFF}", "\u{2028}", "\u{FEFF}", "\u{E000}", "\u{80}"]
        pool += (0...0x1F).map { Unicode.Scalar(UInt8($0)) }
        return pool
    }()

    static let specialIntegers: [Int64] = [0, 1, -1, 9, 10, -10, .max, .min, .max - 1, .min + 1, 1 << 53, (1 << 53) + 1]
    static let specialDoubles: [Double] = [
        0.0, -0.0, 0.1, -0.1, 3.0, 1e16, 1e21, 1e-7, 123.456, 1e300, -1e-300, .leastNonzeroMagnitude, .greatestFiniteMagnitude,
        -.greatestFiniteMagnitude, .leastNormalMagnitude, 9_223_372_036_854_775_808.0, 0.5, 2.5e-5,
    ]

    mutating func int(_ bound: Int) -> Int { Int(rng.next() % UInt64(bound)) }

    mutating func string() -> String {
        var text = String.UnicodeScalarView()
        for _ in 0..<int(12) { text.append(Self.scalars[int(Self.scalars.count)]) }
        return String(text)
    }

    mutating func value(depth: Int = 0) -> JSONValue {
        switch int(depth >= 4 ? 5 : 7) {
        case 0: return .null
        case 1: return .bool(int(2) == 0)
        case 2:
            if int(3) == 0 { return .int(Self.specialIntegers[int(Self.specialIntegers.count)]) }
            return .int(Int64(bitPattern: rng.next()) >> Int64(int(64)))
        case 3:
            if int(3) == 0 { return .double(Self.specialDoubles[int(Self.specialDoubles.count)]) }
            while true {
                let candidate = Double(bitPattern: rng.next())
                if candidate.isFinite { return .double(candidate) }
            }
        case 4: return .string(string())
        case 5: return .array((0..<int(6)).map { _ in value(depth: depth + 1) })
        default:
            var members: [String: JSONValue] = [:]
            for _ in 0..<int(6) { members[string()] = value(depth: depth + 1) }
            return .object(members)
        }
    }
}

private func text(_ value: JSONValue) -> String { JSONWriter.string(value) }

private func stringBytes(_ text: String) -> [UInt8] {
    var buffer: [UInt8] = []
    JSONWriter.writeString(text, into: &buffer)
    return buffer
}

private func integerText<T: BinaryInteger>(_ value: T) -> String {
    var buffer: [UInt8] = []
    JSONWriter.writeInteger(value, into: &buffer)
    return String(decoding: buffer, as: UTF8.self)
}

@Suite("JSONWriter")
struct JSONWriterTests {
    // MARK: - Scalars and containers

    @Test("scalars")
    func scalars() {
        expectEqual(text(.null), "null")
        expectEqual(text(.bool(true)), "true")
        expectEqual(text(.bool(false)), "false")
        expectEqual(text(.int(3)), "3")
        expectEqual(text(.int(-42)), "-42")
        expectEqual(text(.string("hi")), #""hi""#)
        expectEqual(text(.double(0.5)), "0.5")
        expectEqual(text(.double(-2.25)), "-2.25")
    }

    @Test("a double that is a whole number still reads back as a double, distinct from the integer")
    func integralDoubles() throws {
        let written = text(.double(3.0))
        #expect(written != text(.int(3)))
        #expect(strictlyEqual(try JSONParser.parse(written), .double(3.0)))
        #expect(strictlyEqual(try JSONParser.parse(text(.double(1e21))), .double(1e21)))
        #expect(strictlyEqual(try JSONParser.parse(text(.double(-0.0))), .double(-0.0)))
    }

    @Test("non-finite doubles (which JSON cannot express) are written as null")
    func nonFinite() {
        expectEqual(text(.double(.nan)), "null")
        expectEqual(text(.double(.infinity)), "null")
        expectEqual(text(.double(-.infinity)), "null")
        expectEqual(text(.array([.double(.nan), .int(1)])), "[null,1]")
    }

    @Test("containers are compact")
    func containers() {
        expectEqual(text(.array([])), "[]")
        expectEqual(text(.object([:])), "{}")
        expectEqual(text(.array([.int(1), .array([.bool(true), .null]), .string("x"), .object([:])])), #"[1,[true,null],"x",{}]"#)
        expectEqual(text(.object(["a": .array([.int(1), .int(2)]), "b": .object(["c": .null])])), #"{"a":[1,2],"b":{"c":null}}"#)
    }

    // MARK: - Object keys

    @Test("object keys are written sorted, at every level")
    func sortedKeys() {
        let value: JSONValue = .object([
            "b": .int(1), "a": .int(2), "c": .object(["z": .int(1), "y": .int(2), "x": .array([.object(["n": .null, "m": .null])])]),
        ])
        expectEqual(text(value), #"{"a":2,"b":1,"c":{"x":[{"m":null,"n":null}],"y":2,"z":1}}"#)
        let tricky: JSONValue = .object(["b": .int(1), "a": .int(2), "B": .int(3), "_": .int(4), "aa": .int(5), "": .int(6)])
        expectEqual(text(tricky), #"{"":6,"B":3,"_":4,"a":2,"aa":5,"b":1}"#)
    }

    @Test("equal objects built in different orders encode to the same bytes")
    func deterministicObjects() {
        let keys = (0..<50).map { "key\($0)" }
        var forward: [String: JSONValue] = [:]
        for (index, key) in keys.enumerated() { forward[key] = .int(Int64(index)) }
        var backward: [String: JSONValue] = [:]
        for (index, key) in keys.enumerated().reversed() { backward[key] = .int(Int64(index)) }
        backward.reserveCapacity(1000)  // a different capacity gives a different iteration order
        expectEqual(JSONWriter.bytes(.object(forward)), JSONWriter.bytes(.object(backward)))
        let written = text(.object(forward))
        let sortedKeys = keys.sorted()
        #expect(written.hasPrefix(#"{"\#(sortedKeys[0])":"#))
        #expect(written.hasSuffix(#""\#(sortedKeys.last!)":\#(keys.firstIndex(of: sortedKeys.last!)!)}"#))
    }

    @Test("object keys are escaped like strings")
    func escapedKeys() {
        expectEqual(text(.object(["a\"b": .int(1), "c\nd": .int(2)])), #"{"a\"b":1,"c\nd":2}"#)
    }

    // MARK: - Strings

    @Test("escaping of quotes, backslashes and control characters", arguments: [
        ("\"", #""\"""#), ("\\", #""\\""#), ("\n", #""\n""#), ("\r", #""\r""#), ("\t", #""\t""#),
        ("\u{08}", #""\b""#), ("\u{0C}", #""\f""#), ("\u{0}", #""\u0000""#), ("\u{1}", #""\u0001""#),
        ("\u{0B}", #""\u000b""#), ("\u{1A}", #""\u001a""#), ("\u{1F}", #""\u001f""#),
        ("a\"b\\c\nd", #""a\"b\\c\nd""#), ("\"\"", #""\"\"""#), ("end\\", #""end\\""#), ("\\start", #""\\start""#),
        ("", #""""#), ("plain text", #""plain text""#),
        // Not escaped: '/', DEL and everything outside ASCII.
        ("/", #""/""#), ("\u{7F}", "\"\u{7F}\""), ("é€😀", "\"é€😀\""), ("\u{2028}", "\"\u{2028}\""),
    ])
    func escaping(input: String, expected: String) {
        expectEqual(String(decoding: stringBytes(input), as: UTF8.self), expected)
    }

    @Test("non-ASCII text passes through as its UTF-8 bytes")
    func nonASCIIPassthrough() {
        let text = "Zürich 東京 😀 \u{10FFFF}"
        expectEqual(stringBytes(text), [0x22] + Array(text.utf8) + [0x22])
    }

    @Test("every control character is escaped and reads back")
    func allControlCharacters() throws {
        let all = String(String.UnicodeScalarView((0...0x1F).map { Unicode.Scalar(UInt8($0)) }))
        let encoded = stringBytes(all)
        #expect(!encoded.contains { $0 < 0x20 })
        #expect(strictlyEqual(try JSONParser.parse(encoded), .string(all)))
    }

    @Test("writeString and write append to what the buffer holds")
    func appends() {
        var buffer: [UInt8] = Array("prefix:".utf8)
        JSONWriter.writeString("x", into: &buffer)
        JSONWriter.write(.array([.int(1)]), into: &buffer)
        JSONWriter.append("!", to: &buffer)
        expectEqual(String(decoding: buffer, as: UTF8.self), #"prefix:"x"[1]!"#)
    }

    @Test("bytes, string and description agree")
    func entryPoints() {
        let value: JSONValue = .object(["k": .array([.string("é"), .double(1.5), .null])])
        expectEqual(JSONWriter.string(value), #"{"k":["é",1.5,null]}"#)
        expectEqual(JSONWriter.bytes(value), Array(JSONWriter.string(value).utf8))
        expectEqual(value.description, JSONWriter.string(value))
    }

    // MARK: - Integers

    @Test("writeInteger")
    func writeInteger() {
        expectEqual(integerText(0), "0")
        expectEqual(integerText(Int64(0)), "0")
        expectEqual(integerText(UInt64(0)), "0")
        expectEqual(integerText(1), "1")
        expectEqual(integerText(-1), "-1")
        expectEqual(integerText(10), "10")
        expectEqual(integerText(-100), "-100")
        expectEqual(integerText(1_234_567_890), "1234567890")
        expectEqual(integerText(Int64.max), "9223372036854775807")
        expectEqual(integerText(Int64.min), "-9223372036854775808")
        expectEqual(integerText(UInt64.max), "18446744073709551615")
        expectEqual(integerText(Int8.min), "-128")
        expectEqual(integerText(Int8.max), "127")
        expectEqual(integerText(UInt8.max), "255")
        expectEqual(integerText(Int32.min), "-2147483648")
        expectEqual(text(.int(.min)), "-9223372036854775808")
        expectEqual(text(.int(.max)), "9223372036854775807")
    }

    @Test("writeInteger agrees with String(describing:) on many values")
    func writeIntegerMatchesDescription() {
        var rng = SplitMix64(state: 7)
        for _ in 0..<2000 {
            let value = Int64(bitPattern: rng.next()) >> Int64(rng.next() % 64)
            expectEqual(integerText(value), String(value))
        }
        var powers: [Int64] = []
        var power: Int64 = 1
        for _ in 0..<18 {
            powers += [power - 1, power, power + 1, -power]
            power *= 10
        }
        for value in powers {
            expectEqual(integerText(value), String(value))
        }
        var buffer: [UInt8] = Array("rev=".utf8)
        JSONWriter.writeInteger(42, into: &buffer)
        expectEqual(buffer, Array("rev=42".utf8))
    }

    // MARK: - Round trip

    @Test("parse(write(x)) is x, kinds and all, on a varied seeded set", arguments: [1, 2, 3, 42, 2024] as [UInt64])
    func roundTrip(seed: UInt64) throws {
        var generator = ValueGenerator(rng: SplitMix64(state: seed))
        for _ in 0..<400 {
            let value = generator.value()
            let written = JSONWriter.bytes(value)
            #expect(!written.contains { $0 < 0x20 }, "raw control byte in \(written)")
            let parsed = try JSONParser.parse(written)
            #expect(strictlyEqual(parsed, value), "\(String(decoding: written, as: UTF8.self))")
            expectEqual(JSONWriter.bytes(parsed), written)
        }
    }

    @Test("round trip of hand-picked values")
    func roundTripExamples() throws {
        let values: [JSONValue] = [
            .int(.min), .int(.max), .double(.leastNonzeroMagnitude), .double(.greatestFiniteMagnitude), .double(0.1 + 0.2),
            .string("\u{0}\u{1F}\"\\/é😀"), .array([.array([.array([])])]), .object(["": .object(["": .null])]),
            .double(123_456_789_012_345_680_000.0), .double(1e-7),
        ]
        for value in values {
            let parsed = try JSONParser.parse(JSONWriter.bytes(value))
            #expect(strictlyEqual(parsed, value), "\(value)")
        }
    }
}

/// `writeString` skips eight bytes with nothing to escape at a time: a byte to escape must be
/// escaped wherever it falls relative to those steps, and in the last bytes of the string.
@Suite("JSONWriter string scan")
struct JSONWriterStringScanTests {
    @Test func escapesAreFoundAtEveryOffset() throws {
        for length in 0..<40 {
            for position in 0...length {
                let before = String(repeating: "a", count: position)
                let after = String(repeating: "é", count: (length - position) / 2) + String(repeating: "b", count: (length - position) % 2)
                for (raw, escaped) in [("\"", #"\""#), ("\\", #"\\"#), ("\n", #"\n"#), ("\u{1F}", #"\u001f"#), ("\u{7F}", "\u{7F}"), ("😀", "😀")] {
                    let text = before + raw + after
                    let written = JSONWriter.string(.string(text))
                    expectEqual(written, "\"" + before + escaped + after + "\"", "\(raw.unicodeScalars.first!.value) at \(position) of \(length)")
                    #expect(strictlyEqual(try JSONParser.parse(written), .string(text)))
                }
            }
        }
    }
}
