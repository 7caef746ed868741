import Testing
@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer
import KVOJSON

/// Structural equality that, unlike `JSONValue.==`, tells `.int(3)` from `.double(3.0)`, compares
/// doubles bit for bit (so `-0.0` is not `0.0`) and strings by their UTF-8 bytes. Shared by the
/// JSON test files.
func strictlyEqual(_ a: JSONValue, _ b: JSONValue) -> Bool {
    switch (a, b) {
    case (.null, .null): return true
    case let (.bool(x), .bool(y)): return x == y
    case let (.int(x), .int(y)): return x == y
    case let (.double(x), .double(y)): return x.bitPattern == y.bitPattern
    case let (.string(x), .string(y)): return x.utf8.elementsEqual(y.utf8)
    case let (.array(x), .array(y)):
        return x.count == y.count && zip(x, y).allSatisfy { strictlyEqual($0, $1) }
    case let (.object(x), .object(y)):
        return x.count == y.count && x.allSatisfy { key, value in y[key].map { strictlyEqual(value, $0) } ?? false }
    default: return false
    }
}

/// The error `JSONParser` throws for `bytes`, or nil when it parses.
func parseError(_ bytes: [UInt8]) -> JSONParseError? {
    do {
        _ = try JSONParser.parse(bytes)
        return nil
    } catch {
        return error
    }
}

func parseError(_ text: String) -> JSONParseError? {
    parseError(Array(text.utf8))
}

func isSyntaxError(_ error: JSONParseError?) -> Bool {
    if case .syntax = error?.reason { return true }
    return false
}

private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

@Suite("JSONParser")
struct JSONParserTests {
    @Test("objects of every size around the members collected on the stack, repeated keys keeping the last value",
          arguments: [0, 1, 2, 3, 15, 16, 17, 32, 40])
    func objectsAroundTheStackedMembers(count: Int) throws {
        // Issue 13: an object's first 16 members are collected before its dictionary is made.
        let members = (0..<count).map { #""k\#($0)":\#($0)"# }
        let repeated = count > 0 ? [#""k0":"last""#] : []
        let value = try JSONParser.parse("{" + (members + repeated).joined(separator: ",") + "}")
        var expected: [String: JSONValue] = [:]
        for index in 0..<count { expected["k\(index)"] = .int(Int64(index)) }
        if count > 0 { expected["k0"] = "last" }
        expectEqual(value, .object(expected))
        // A syntax error after the members: reported, nothing else (what was collected is released).
        #expect(throws: JSONParseError.self) { try JSONParser.parse("{" + (members + ["x"]).joined(separator: ",") + "}") }
        #expect(throws: JSONParseError.self) { try JSONParser.parse("{" + (members + [#""nested":{"a":1,"b":"#]).joined(separator: ",")) }
        // The same object below the depth where objects stop collecting on the stack.
        let deep = String(repeating: #"{"d":"#, count: 12) + "{" + (members + repeated).joined(separator: ",") + "}"
            + String(repeating: "}", count: 12)
        var inner = try JSONParser.parse(deep)
        for _ in 0..<12 { inner = try #require(inner["d"]) }
        expectEqual(inner, .object(expected))
    }

    // MARK: - Value types

    @Test("literals")
    func literals() throws {
        #expect(strictlyEqual(try JSONParser.parse("null"), .null))
        #expect(strictlyEqual(try JSONParser.parse("true"), .bool(true)))
        #expect(strictlyEqual(try JSONParser.parse("false"), .bool(false)))
    }

    @Test("misspelled or truncated literals are syntax errors", arguments: [
        "nul", "nulL", "tru", "True", "fals", "falsy", "NULL", "n", "t", "f",
    ])
    func badLiterals(text: String) {
        #expect(isSyntaxError(parseError(text)))
    }

    @Test("strings")
    func strings() throws {
        #expect(strictlyEqual(try JSONParser.parse(#""""#), .string("")))
        #expect(strictlyEqual(try JSONParser.parse(#""abc""#), .string("abc")))
        #expect(strictlyEqual(try JSONParser.parse("\"é€😀 ok\""), .string("é€😀 ok")))
        // DEL (0x7F) is not a control character for JSON.
        #expect(strictlyEqual(try JSONParser.parse("\"a\u{7F}b\""), .string("a\u{7F}b")))
    }

    @Test("arrays and objects, nested")
    func containers() throws {
        #expect(strictlyEqual(try JSONParser.parse("[]"), .array([])))
        #expect(strictlyEqual(try JSONParser.parse("{}"), .object([:])))
        let value = try JSONParser.parse(#"[1,"a",null,true,false,2.5,[],{},[[3]],{"k":{"m":[false]}}]"#)
        let expected: JSONValue = .array([
            .int(1), .string("a"), .null, .bool(true), .bool(false), .double(2.5), .array([]), .object([:]),
            .array([.array([.int(3)])]), .object(["k": .object(["m": .array([.bool(false)])])]),
        ])
        #expect(strictlyEqual(value, expected))
        let object = try JSONParser.parse(#"{"name":"Ada","age":36,"tags":["x","y"],"address":{"city":"London"},"n":null}"#)
        #expect(strictlyEqual(object, .object([
            "name": .string("Ada"), "age": .int(36), "tags": .array([.string("x"), .string("y")]),
            "address": .object(["city": .string("London")]), "n": .null,
        ])))
    }

    @Test("object keys may be any string, including escaped and empty ones")
    func objectKeys() throws {
        let value = try JSONParser.parse(#"{"":1,"a\"b":2,"\u00e9":3,"a.b":4}"#)
        #expect(strictlyEqual(value, .object(["": .int(1), "a\"b": .int(2), "é": .int(3), "a.b": .int(4)])))
    }

    @Test("structural errors", arguments: [
        "[1,]", "[,1]", "[1 2]", "[1,,2]", "[", "[1", "[1,", "]", "}", ":", ",",
        #"{"a":1,}"#, #"{"a"}"#, #"{"a":}"#, "{a:1}", "{1:1}", #"{"a" 1}"#, #"{"a":1 "b":2}"#,
        "{", #"{"a""#, #"{"a":"#, #"{"a":1"#, "{,}", "[}", "{]", #"{"a":1]"#, "['a']",
    ])
    func structuralErrors(text: String) {
        #expect(isSyntaxError(parseError(text)), "\(text)")
    }

    // MARK: - Numbers

    @Test("integers stay integers", arguments: [
        ("0", Int64(0)), ("-0", 0), ("3", 3), ("-17", -17), ("1234567890123", 1_234_567_890_123),
        ("9223372036854775807", Int64.max), ("-9223372036854775808", Int64.min),
        ("9223372036854775806", Int64.max - 1), ("-9223372036854775807", Int64.min + 1),
    ])
    func integers(text: String, expected: Int64) throws {
        let value = try JSONParser.parse(text)
        guard case let .int(integer) = value else {
            Issue.record("\(text) parsed as \(value), not an integer")
            return
        }
        expectEqual(integer, expected)
    }

    @Test("decimals and exponents are doubles, also past 64 bits", arguments: [
        ("3.0", 3.0), ("1e3", 1000.0), ("1E3", 1000.0), ("1e+3", 1000.0), ("25e-1", 2.5), ("-0.5", -0.5),
        ("0.1", 0.1), ("-0.0", -0.0), ("0e0", 0.0), ("1.5e2", 150.0), ("1e-05", 0.00001),
        ("9223372036854775808.0", 9_223_372_036_854_775_808.0), ("9.223372036854776e18", 9_223_372_036_854_775_808.0),
        ("1.8446744073709552e+19", 18_446_744_073_709_551_616.0), ("1e20", 1e20), ("1e23", 1e23),
        ("1.7976931348623157e308", Double.greatestFiniteMagnitude),
        ("5e-324", Double.leastNonzeroMagnitude),
    ])
    func doubles(text: String, expected: Double) throws {
        let value = try JSONParser.parse(text)
        guard case let .double(number) = value else {
            Issue.record("\(text) parsed as \(value), not a double")
            return
        }
        expectEqual(number.bitPattern, expected.bitPattern, "\(text) -> \(number)")
    }

    /// Integers are exact or refused, never rounded (issue 41): 2^63 + 1 as a double would be 2^63; Python writes
    /// big integers exactly, JavaScript writes 2**64 as 18446744073709552000 (not 2^64) and 1e20 with its digits.
    @Test("integer literals past 64 bits are refused, never rounded to a double", arguments: [
        "9223372036854775808", "-9223372036854775809", "9223372036854775809", "18446744073709551616",
        "18446744073709552000", "100000000000000000000", "100000000000000000000000", "-100000000000000000000",
        String(repeating: "9", count: 400),
    ])
    func integersPast64Bits(text: String) throws {
        let error = refusal(text)
        guard case let .integerOutOfRange(literal, field)? = error?.reason else {
            Issue.record("\(text): \(String(describing: error))")
            return
        }
        expectEqual(field, nil)
        expectEqual(error?.offset, 0)
        expectEqual(literal, (text.count > 64 ? String(text.prefix(64)) + "…" : text))
        #expect(String(describing: error!).contains("outside the 64-bit range"))
        // Inside arrays and objects alike, where it is: the offset of its first byte.
        let nested = refusal("[1,{\"a\":\(text)}]")
        expectEqual(nested?.offset, 8)
        if case .integerOutOfRange? = nested?.reason {} else { Issue.record("nested \(text): \(String(describing: nested))") }
    }

    @Test("a request's member names the field an integer past 64 bits is in, scanned or parsed")
    func integerPast64BitsNamesItsField() throws {
        let line = Array(#"{"op":"increment","object":"o","keyPath":"n","by":9223372036854775808,"id":1}"#.utf8)
        var errors: [JSONParseError?] = [nil, nil]
        line.withUnsafeBufferPointer { bytes in
            do throws(JSONParseError) { _ = try JSONParser.scanMembers(bytes, wideIntegers: .refused) } catch { errors[0] = error }
            do throws(JSONParseError) { _ = try JSONParser.parseMembers(bytes, wideIntegers: .refused) } catch { errors[1] = error }
        }
        for error in errors {
            expectEqual(error?.reason, .integerOutOfRange(literal: "9223372036854775808", field: "by"))
            expectEqual(error?.offset, 50)
            expectEqual(error.map(String.init(describing:))?.hasPrefix("'by': the integer 9223372036854775808 is outside"), true)
        }
        // Int64's own bounds are integers.
        expectEqual(try JSONParser.parse("[9223372036854775807,-9223372036854775808]"), [.int(.max), .int(.min)])
    }

    /// The error `JSONParser` throws for `text` when it refuses wide integers (what kvod does for requests).
    private func refusal(_ text: String) -> JSONParseError? {
        do throws(JSONParseError) {
            _ = try JSONParser.parse(text, wideIntegers: .refused)
            return nil
        } catch {
            return error
        }
    }

    /// Other programs' JSON (NATS's API and monitoring replies hold unsigned 64-bit counters such as
    /// 18446744073709551615) is read as JSON parsers commonly read it: a wide integer is the nearest double.
    @Test("by default an integer past 64 bits is the nearest double, in values and in a scan of members")
    func wideIntegersAreNearestDoublesByDefault() throws {
        #expect(strictlyEqual(try JSONParser.parse("18446744073709551615"), .double(18_446_744_073_709_551_615.0)))
        #expect(strictlyEqual(try JSONParser.parse(#"{"reserved":18446744073709551615,"n":1}"#),
                              ["reserved": .double(18_446_744_073_709_551_615.0), "n": .int(1)]))
        let line = Array(#"{"a":-9223372036854775809,"b":2}"#.utf8)
        let members = try line.withUnsafeBufferPointer { bytes throws(JSONParseError) in try JSONParser.scanMembers(bytes) }
        expectEqual(members?.map(\.key), ["a", "b"])
        expectEqual(members?.first?.isCompact, false)
    }

    @Test("numbers too large for a double are rejected, never infinity", arguments: ["1e400", "-1e400", "1e999999"])
    func numbersOutOfRange(text: String) {
        #expect(isSyntaxError(parseError(text)))
    }

    @Test("malformed numbers", arguments: [
        "01", "-01", "00", "007", "-00", "1.", ".5", "-", "+1", "1e", "1e+", "1E-", "2.e3", "0x10", "1_000", "NaN",
        "Infinity", "-Infinity", "1.5.2", "--1", "- 1", "1e2.5", "[01]", #"{"a":-}"#,
    ])
    func malformedNumbers(text: String) {
        #expect(isSyntaxError(parseError(text)), "\(text)")
    }

    @Test("leading zero is reported where the second digit is")
    func leadingZeroOffset() {
        expectEqual(parseError("01")?.offset, 1)
        expectEqual(parseError("[-012]")?.offset, 3)
    }

    @Test("numbers inside containers keep their kind")
    func numbersInContainers() throws {
        let value = try JSONParser.parse(#"[3,3.0,1e3,{"n":-4}]"#)
        #expect(strictlyEqual(value, .array([.int(3), .double(3.0), .double(1000), .object(["n": .int(-4)])])))
    }

    // MARK: - Escapes

    @Test("simple escapes")
    func simpleEscapes() throws {
        let value = try JSONParser.parse(#""\"\\\/\b\f\n\r\t""#)
        #expect(strictlyEqual(value, .string("\"\\/\u{08}\u{0C}\n\r\t")))
        // Escapes between plain text, and raw UTF-8 after an escape (the slow path).
        #expect(strictlyEqual(try JSONParser.parse(#""a\nb€c\td""#), .string("a\nb€c\td")))
    }

    @Test("\\u escapes, upper and lower case hex, surrogate pairs", arguments: [
        (#""\u0041""#, "A"), (#""\u00e9\u00E9""#, "éé"), (#""\u20AC""#, "€"), (#""\u0000""#, "\u{0}"),
        (#""a\u0001b""#, "a\u{1}b"), (#""\u001f""#, "\u{1F}"), (#""\uFFFF""#, "\u{FFFF}"),
        (#""\uD7FF\uE000""#, "\u{D7FF}\u{E000}"),
        (#""\ud83d\ude00""#, "😀"), (#""\uD834\uDD1E""#, "𝄞"), (#""\uD800\uDC00""#, "\u{10000}"),
        (#""\uDBFF\uDFFF""#, "\u{10FFFF}"), (#""x\uD83D\uDE00y""#, "x😀y"),
    ])
    func unicodeEscapes(text: String, expected: String) throws {
        #expect(strictlyEqual(try JSONParser.parse(text), .string(expected)), "\(text)")
    }

    @Test("lone or mismatched surrogate escapes are errors", arguments: [
        #""\uD800""#, #""\uDBFF""#, #""\uDC00""#, #""\uDFFF""#, #""\uD800x""#, #""\uD800\u0041""#,
        #""\uD800\uD800""#, #""\uDFFF\uD800""#, #""\uD800\n""#, #""\uDC00\uD800""#, #""a\uDE00b""#,
        #""\uD83D\""#, #""\uD83D\u""#, #""\uD83D\uDE0""#,
    ])
    func loneSurrogates(text: String) {
        #expect(isSyntaxError(parseError(text)), "\(text)")
    }

    @Test("invalid escapes", arguments: [
        #""\x""#, #""\u12""#, #""\u12G4""#, #""\U0041""#, #""\'""#, #""\a""#, #""\0""#, #""\u""#, #""\"#, #""\u00"#,
        #""\ u0041""#, #""\u-041""#,
    ])
    func invalidEscapes(text: String) {
        #expect(isSyntaxError(parseError(text)), "\(text)")
    }

    @Test("an unterminated string is an error", arguments: [#"""#, #""abc"#, #""abc\n"#, #""é"#, #"["a]"#])
    func unterminatedString(text: String) {
        #expect(isSyntaxError(parseError(text)), "\(text)")
    }

    // MARK: - Control characters

    @Test("raw control characters in a string are errors", arguments: Array(UInt8(0)...UInt8(0x1F)))
    func controlCharactersInStrings(byte: UInt8) {
        // Without escapes (fast path) and after an escape (slow path).
        let plain: [UInt8] = [0x22, 0x61, byte, 0x62, 0x22]
        let afterEscape: [UInt8] = bytes(#""\n"#) + [byte, 0x22]
        let inKey: [UInt8] = bytes(#"{"k"#) + [byte] + bytes(#"":1}"#)
        for input in [plain, afterEscape, inKey] {
            let error = parseError(input)
            #expect(isSyntaxError(error), "\(input)")
        }
        expectEqual(parseError(plain)?.offset, 2)
        expectEqual(parseError(afterEscape)?.offset, 3)
    }

    // MARK: - UTF-8

    /// Byte sequences that are not UTF-8 (RFC 3629).
    static let invalidSequences: [[UInt8]] = [
        [0x80], [0xBF], [0x80, 0x80],             // continuation bytes without a lead
        [0xFF], [0xFE], [0xF8, 0x88, 0x80, 0x80, 0x80], [0xFC, 0x84, 0x80, 0x80, 0x80, 0x80],
        [0xC0, 0x80], [0xC1, 0xBF],               // overlong 2-byte (NUL, U+007F)
        [0xE0, 0x80, 0x80], [0xE0, 0x9F, 0xBF],   // overlong 3-byte (NUL, U+07FF)
        [0xF0, 0x80, 0x80, 0x80], [0xF0, 0x8F, 0xBF, 0xBF], // overlong 4-byte (NUL, U+FFFF)
        [0xED, 0xA0, 0x80], [0xED, 0xBF, 0xBF],   // UTF-16 surrogates U+D800, U+DFFF encoded in UTF-8
        [0xED, 0xA0, 0xBD, 0xED, 0xB8, 0x80],     // a surrogate pair encoded as two 3-byte sequences (CESU-8)
        [0xF4, 0x90, 0x80, 0x80], [0xF5, 0x80, 0x80, 0x80], [0xF7, 0xBF, 0xBF, 0xBF], // above U+10FFFF
        [0xC3], [0xE2, 0x82], [0xF0, 0x9F, 0x98], // truncated
        [0xC3, 0xC3], [0xE2, 0x28, 0xA1], [0xE2, 0x82, 0x28], [0xF0, 0x9F, 0x98, 0x28], // bad continuation
        [0xC3, 0x41], [0xF0, 0x28, 0x8C, 0xBC],
    ]

    @Test("invalid UTF-8 inside a string is .invalidUTF8 at its first byte", arguments: JSONParserTests.invalidSequences)
    func invalidUTF8InStrings(sequence: [UInt8]) {
        let plain: [UInt8] = [0x22] + sequence + [0x22]
        let plainError = parseError(plain)
        expectEqual(plainError?.reason, .invalidUTF8)
        expectEqual(plainError?.offset, 1)

        let afterEscape: [UInt8] = bytes(#""\t"#) + sequence + [0x22]
        let escapeError = parseError(afterEscape)
        expectEqual(escapeError?.reason, .invalidUTF8)
        expectEqual(escapeError?.offset, 3)

        let asKey: [UInt8] = bytes(#"{"ab"#) + sequence + bytes(#"":1}"#)
        expectEqual(parseError(asKey)?.reason, .invalidUTF8)
        expectEqual(parseError(asKey)?.offset, 4)

        // At the very end of the input, with no closing quote.
        let unterminated: [UInt8] = [0x22] + sequence
        expectEqual(parseError(unterminated)?.reason, .invalidUTF8)
    }

    @Test("invalid UTF-8 where a value is expected is .invalidUTF8", arguments: JSONParserTests.invalidSequences)
    func invalidUTF8OutsideStrings(sequence: [UInt8]) {
        let cases: [([UInt8], Int)] = [
            (sequence, 0),
            (bytes("  ") + sequence, 2),
            (bytes("[") + sequence + bytes("]"), 1),
            (bytes("[1,") + sequence + bytes("]"), 3),
            (bytes(#"{"a":"#) + sequence + bytes("}"), 5),
        ]
        for (input, offset) in cases {
            let error = parseError(input)
            expectEqual(error?.reason, .invalidUTF8, "\(input)")
            expectEqual(error?.offset, offset, "\(input)")
        }
    }

    @Test(
        "invalid UTF-8 after a value, or where a key or separator is expected, is .invalidUTF8",
        arguments: JSONParserTests.invalidSequences
    )
    func invalidUTF8OutsideStringsElsewhere(sequence: [UInt8]) {
        for input in [
            bytes("1") + sequence,
            bytes(#"{"a":1}"#) + sequence,
            bytes("{") + sequence + bytes("}"),
            bytes("[1") + sequence + bytes("]"),
        ] {
            expectEqual(parseError(input)?.reason, .invalidUTF8, "\(input)")
        }
    }

    @Test("UTF-8 boundary scalars are accepted in strings", arguments: [
        ([0xC2, 0x80], "\u{80}"), ([0xDF, 0xBF], "\u{7FF}"), ([0xE0, 0xA0, 0x80], "\u{800}"),
        ([0xED, 0x9F, 0xBF], "\u{D7FF}"), ([0xEE, 0x80, 0x80], "\u{E000}"), ([0xEF, 0xBF, 0xBF], "\u{FFFF}"),
        ([0xF0, 0x90, 0x80, 0x80], "\u{10000}"), ([0xF4, 0x8F, 0xBF, 0xBF], "\u{10FFFF}"),
        ([0xE2, 0x82, 0xAC], "€"), ([0xF0, 0x9F, 0x98, 0x80], "😀"),
    ] as [([UInt8], String)])
    func validUTF8InStrings(sequence: [UInt8], expected: String) throws {
        let plain = try JSONParser.parse([0x22] + sequence + [0x22])
        #expect(strictlyEqual(plain, .string(expected)))
        let afterEscape = try JSONParser.parse(bytes(#""\""#) + sequence + [0x22])
        #expect(strictlyEqual(afterEscape, .string("\"" + expected)))
    }

    @Test("valid non-ASCII text outside a string is a syntax error, not invalid UTF-8", arguments: [
        "é", "[€]", "\u{A0}1", "\u{FEFF}1", "{\"a\":😀}",
    ])
    func nonASCIIOutsideStrings(text: String) {
        #expect(isSyntaxError(parseError(text)), "\(text)")
    }

    // MARK: - Whitespace, empty input, trailing data

    @Test("white space around and between tokens")
    func whitespace() throws {
        let value = try JSONParser.parse(" \t\r\n[ 1 ,\n{ \"a\" :\t2 } , [ ] , { } ]\r\n ")
        #expect(strictlyEqual(value, .array([.int(1), .object(["a": .int(2)]), .array([]), .object([:])])))
        #expect(strictlyEqual(try JSONParser.parse("\n\n42\n"), .int(42)))
    }

    @Test("characters that are not JSON white space", arguments: [
        "\u{0B}1", "\u{0C}1", "1\u{0B}", "[1,\u{0C}2]", "\u{0}1", "1\u{0}",
    ])
    func nonJSONWhitespace(text: String) {
        #expect(isSyntaxError(parseError(text)), "\(text.unicodeScalars.map(\.value))")
    }

    @Test("empty or blank input is an error", arguments: ["", " ", "\n", " \t\r\n "])
    func emptyInput(text: String) {
        #expect(isSyntaxError(parseError(text)))
    }

    @Test("trailing data after the value is an error", arguments: [
        "1 2", "{}x", "[]]", "null null", #""a""b""#, "truex", "1,", "{} {}", "[1]\n[2]", "0 0", "1.5.", "-1-",
        #"{"a":1}}"#,
    ])
    func trailingData(text: String) {
        #expect(isSyntaxError(parseError(text)), "\(text)")
    }

    @Test("error offsets point at the offending byte")
    func errorOffsets() {
        expectEqual(parseError("[1,]")?.offset, 3)
        expectEqual(parseError("  x")?.offset, 2)
        expectEqual(parseError(#"{"a":1}x"#)?.offset, 7)
        expectEqual(parseError("{\"a\":1} \n x")?.offset, 10)
        expectEqual(parseError("")?.offset, 0)
    }

    // MARK: - Depth

    private static func nestedArrays(_ depth: Int) -> String {
        String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
    }

    private static func nestedObjects(_ depth: Int) -> String {
        String(repeating: #"{"a":"#, count: depth) + "1" + String(repeating: "}", count: depth)
    }

    private static func arrayDepth(_ value: JSONValue) -> Int {
        guard case let .array(elements) = value else { return 0 }
        return 1 + (elements.map(arrayDepth).max() ?? 0)
    }

    @Test("nesting exactly at maximumDepth is accepted")
    func depthAtLimit() throws {
        let arrays = try JSONParser.parse(Self.nestedArrays(JSONParser.maximumDepth))
        expectEqual(Self.arrayDepth(arrays), JSONParser.maximumDepth)

        var value = try JSONParser.parse(Self.nestedObjects(JSONParser.maximumDepth))
        var levels = 0
        while case let .object(members) = value, let inner = members["a"] {
            levels += 1
            value = inner
        }
        expectEqual(levels, JSONParser.maximumDepth)
        #expect(strictlyEqual(value, .int(1)))

        let mixed = String(repeating: #"[{"a":"#, count: JSONParser.maximumDepth / 2) + "null"
            + String(repeating: "}]", count: JSONParser.maximumDepth / 2)
        #expect(throws: Never.self) { try JSONParser.parse(mixed) }
    }

    @Test("nesting one level over maximumDepth is .tooDeep at the opening bracket")
    func depthOverLimit() {
        let depth = JSONParser.maximumDepth + 1
        let arrays = parseError(Self.nestedArrays(depth))
        expectEqual(arrays?.reason, .tooDeep)
        expectEqual(arrays?.offset, JSONParser.maximumDepth)

        let objects = parseError(Self.nestedObjects(depth))
        expectEqual(objects?.reason, .tooDeep)
        expectEqual(objects?.offset, JSONParser.maximumDepth * 5)

        let mixed = String(repeating: #"[{"a":"#, count: depth / 2 + 1) + "null"
            + String(repeating: "}]", count: depth / 2 + 1)
        expectEqual(parseError(mixed)?.reason, .tooDeep)
    }

    @Test("absurdly deep or unterminated nesting fails cleanly")
    func veryDeep() {
        expectEqual(parseError(String(repeating: "[", count: 200_000))?.reason, .tooDeep)
        expectEqual(parseError(String(repeating: #"{"":"#, count: 100_000))?.reason, .tooDeep)
        // Unterminated but within the limit: a syntax error, not tooDeep.
        #expect(isSyntaxError(parseError(String(repeating: "[", count: JSONParser.maximumDepth))))
    }

    @Test("closed containers give their depth back")
    func depthIsReleased() throws {
        // Many siblings, each nested right up to the limit, inside one array.
        let sibling = Self.nestedArrays(JSONParser.maximumDepth - 1)
        let text = "[" + Array(repeating: sibling, count: 10).joined(separator: ",") + "]"
        let value = try JSONParser.parse(text)
        expectEqual(Self.arrayDepth(value), JSONParser.maximumDepth)

        let objects = "[" + Array(repeating: #"{"a":[{}]}"#, count: 1000).joined(separator: ",") + "]"
        guard case let .array(elements) = try JSONParser.parse(objects) else {
            Issue.record("not an array")
            return
        }
        expectEqual(elements.count, 1000)
    }

    // MARK: - Entry points

    @Test("String, [UInt8] and buffer entry points agree; a buffer is read only within its bounds")
    func entryPoints() throws {
        let text = #"{"a":[1,2.5,"x"]}"#
        let fromString = try JSONParser.parse(text)
        let fromBytes = try JSONParser.parse(Array(text.utf8))
        let fromBuffer = try Array(text.utf8).withUnsafeBufferPointer { buffer in try JSONParser.parse(buffer) }
        #expect(strictlyEqual(fromString, fromBytes))
        #expect(strictlyEqual(fromString, fromBuffer))

        let padded = Array("[1]garbage".utf8)
        let prefix = try padded.withUnsafeBufferPointer { buffer in
            try JSONParser.parse(UnsafeBufferPointer(rebasing: buffer[0..<3]))
        }
        #expect(strictlyEqual(prefix, .array([.int(1)])))

        let empty = UnsafeBufferPointer<UInt8>(start: nil, count: 0)
        #expect(throws: JSONParseError.self) { try JSONParser.parse(empty) }
    }

    @Test("error descriptions name the byte offset")
    func errorDescription() {
        expectEqual(parseError("[1,]")?.description.hasSuffix("at byte 3"), true)
        expectEqual(parseError([0xFF])?.description, "invalid UTF-8 at byte 0")
        expectEqual(parseError(Self.nestedArrays(300))?.description.contains("\(JSONParser.maximumDepth)"), true)
    }
}
