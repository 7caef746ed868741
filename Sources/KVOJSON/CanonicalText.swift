/// A JSON value held as its canonical text only: exactly the bytes `JSONWriter.write` makes of it (compact,
/// object keys in ascending order, strings escaped only where JSON needs it, integers in their shortest form and
/// other numbers as `Double.description`), as `JSONParser.MemberText.isCompact` finds them in a request or
/// `JSONCanonicalizer` writes them from a value written any other way. For values nobody reads inside (a `set`
/// of a whole value whose observers read exactly that value): the engine stores, compares, records and
/// forwards the text without building the value's tree (issue 28, issue 44, docs/design.md "Values held as text").
///
/// Equality is the value's (`JSONValue ==`): equal bytes are equal values; where the bytes first differ, two
/// ASCII bytes outside a non-integral number prove different values (`hasSameValue`); otherwise (a number that
/// may be `1.0` against `1`, or a byte of a non-ASCII character, which Swift compares by canonical equivalence)
/// both are decoded and compared. Immutable; any thread.
package struct CanonicalText: Sendable {
    /// The text.
    package let bytes: [UInt8]

    /// Wraps `bytes`, which must be `JSONWriter`'s encoding of a value (`JSONParser.MemberText.isCompact`
    /// proved it, `JSONCanonicalizer` or `JSONWriter` wrote it).
    package init(trusting bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// Bytes of text: the value's size as compact JSON.
    package var count: Int { bytes.count }

    /// The value (decoded anew each call).
    package var value: JSONValue {
        do {
            return try JSONParser.parse(bytes)
        } catch {
            preconditionFailure("canonical text does not parse: \(error)")
        }
    }

    /// Whether the value is a string, number, bool or null (its text starts with neither `[` nor `{`).
    package var isScalar: Bool {
        guard let first = bytes.first else { return true }
        return first != UInt8(ascii: "[") && first != UInt8(ascii: "{")
    }

    /// Whether the two texts hold equal values (`JSONValue ==`), mostly without decoding either.
    package func hasSameValue(as other: CanonicalText) -> Bool {
        let verdict = bytes.withUnsafeBufferPointer { left in
            other.bytes.withUnsafeBufferPointer { right in CanonicalText.byteVerdict(left, right) }
        }
        if let verdict { return verdict }
        return value == other.value
    }

    /// What the bytes of two canonical texts say about their values: true when the bytes are equal, false when
    /// they prove the values different, nil when only decoding can tell.
    ///
    /// Up to the first byte where they differ the texts are the same, so a parser reading either is in the same
    /// state there: inside the same string, number or structure. Two equal values can only differ in bytes inside
    /// a string, by canonically equivalent but different characters (a non-ASCII byte at that point in one of
    /// them: an ASCII character is a starter that never composes with what precedes it), or inside a number, where
    /// one is non-integral (`1` and `1.0`, `0` and `-0.0`: equal integers and equal doubles other than zeros are
    /// written alike, and a double's text always has a digit followed by `.` or `e`). Anything else (a string's
    /// ASCII byte, an integer's digit, structure) differs only between different values.
    static func byteVerdict(_ left: UnsafeBufferPointer<UInt8>, _ right: UnsafeBufferPointer<UInt8>) -> Bool? {
        let common = Swift.min(left.count, right.count)
        var position = 0
        var differs = false
        while position + 8 <= common {
            let difference = ByteScan.littleEndianWord(at: left.baseAddress! + position)
                ^ ByteScan.littleEndianWord(at: right.baseAddress! + position)
            if difference != 0 {
                position += difference.trailingZeroBitCount >> 3
                differs = true
                break
            }
            position += 8
        }
        if !differs {
            while position < common, left[position] == right[position] { position += 1 }
            if position == common, left.count == right.count { return true }
        }
        let leftByte: UInt8 = position < left.count ? left[position] : 0
        let rightByte: UInt8 = position < right.count ? right[position] : 0
        if leftByte >= 0x80 || rightByte >= 0x80 { return nil }
        if mayBeNonIntegral(left, at: position) || mayBeNonIntegral(right, at: position) { return nil }
        return false
    }

    /// Whether the run of number characters (digits, `-`, `+`, `.`, `e`, `E`) that reaches `position` (or ends
    /// just before it) may be a non-integral number: it starts where a number can (the text's start, or after
    /// `:`, `,` or `[`; a number's run always reaches back there, while a run inside a string such as hex digits
    /// starts after a letter or a quote) and has a digit followed by `.`, `e` or `E`. A string's bytes after a
    /// comma may look like one too: then decoding decides.
    private static func mayBeNonIntegral(_ text: UnsafeBufferPointer<UInt8>, at position: Int) -> Bool {
        var start = position
        while start > 0, JSONCanonicalizer.isNumberByte(text[start - 1]) { start -= 1 }
        if start > 0 {
            switch text[start - 1] {
            case UInt8(ascii: ":"), UInt8(ascii: ","), UInt8(ascii: "["): break
            default: return false
            }
        }
        var end = position
        while end < text.count, JSONCanonicalizer.isNumberByte(text[end]) { end += 1 }
        var index = start
        while index + 1 < end {
            if text[index] >= UInt8(ascii: "0"), text[index] <= UInt8(ascii: "9") {
                switch text[index + 1] {
                case UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"): return true
                default: break
                }
            }
            index += 1
        }
        return false
    }

    /// Whether the value equals `other` (`JSONValue ==`); decodes the text.
    package func hasSameValue(as other: JSONValue) -> Bool {
        value == other
    }

    /// `JSONValue.nestingDepth(upTo:)` of the value, read from the text (brackets outside strings; inside a
    /// string a backslash escapes the byte after it, so only an unescaped quote closes one).
    package func nestingDepth(upTo limit: Int) -> Int {
        var depth = 0
        var deepest = 0
        var inString = false
        var escaped = false
        for byte in bytes {
            if escaped {
                escaped = false
                continue
            }
            if inString {
                // (A `where` after `case A, B` would guard only B: inside a string no bracket counts.)
                if byte == UInt8(ascii: "\\") { escaped = true } else if byte == UInt8(ascii: "\"") { inString = false }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                depth += 1
                if depth > deepest {
                    deepest = depth
                    if deepest > limit { return limit + 1 }
                }
            case UInt8(ascii: "]"), UInt8(ascii: "}"): depth -= 1
            default: break
            }
        }
        return deepest
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
