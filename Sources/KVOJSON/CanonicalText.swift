/// A JSON value held as its canonical text only: exactly the bytes `JSONWriter.write` makes of it (compact,
/// object keys in ascending order, no escapes in strings, numbers only as integers in their shortest form),
/// as `JSONParser.Member.compactText` finds them in a request. For values nobody reads inside (a `set` of
/// a whole value whose observers read exactly that value): the engine stores, compares, records and
/// forwards the text without building the value's tree (issue 28, docs/design.md "Values held as text").
///
/// Equality is the value's (`JSONValue ==`): equal bytes are equal values; different bytes are different
/// values when both texts are plain ASCII (integers only, and ASCII strings compare byte by byte); otherwise
/// (non-ASCII strings, which Swift compares by canonical equivalence) both are decoded and compared.
/// Immutable; any thread.
package struct CanonicalText: Sendable {
    /// The text.
    package let bytes: [UInt8]

    /// Wraps `bytes`, which must be `JSONWriter`'s encoding of a value with no non-integral number
    /// (`JSONParser.Member.compactText` proved it, or `JSONWriter` wrote it from such a value).
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
        let equalBytes = bytes.withUnsafeBufferPointer { left in
            other.bytes.withUnsafeBufferPointer { right in
                left.count == right.count && (left.count == 0 || memcmp(left.baseAddress!, right.baseAddress!, left.count) == 0)
            }
        }
        if equalBytes { return true }
        if isASCII && other.isASCII { return false }
        return value == other.value
    }

    /// Whether the value equals `other` (`JSONValue ==`); decodes the text.
    package func hasSameValue(as other: JSONValue) -> Bool {
        value == other
    }

    /// Whether every byte is below 0x80.
    package var isASCII: Bool {
        bytes.withUnsafeBufferPointer { text in
            var position = 0
            while position + 8 <= text.count {
                if ByteScan.hasNonASCII(ByteScan.word(at: text.baseAddress! + position)) { return false }
                position += 8
            }
            while position < text.count {
                if text[position] >= 0x80 { return false }
                position += 1
            }
            return true
        }
    }

    /// `JSONValue.nestingDepth(upTo:)` of the value, read from the text (brackets outside strings; a
    /// canonical string has no escapes, so a quote always opens or closes one).
    package func nestingDepth(upTo limit: Int) -> Int {
        var depth = 0
        var deepest = 0
        var inString = false
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\""): inString.toggle()
            case UInt8(ascii: "["), UInt8(ascii: "{") where !inString:
                depth += 1
                if depth > deepest {
                    deepest = depth
                    if deepest > limit { return limit + 1 }
                }
            case UInt8(ascii: "]"), UInt8(ascii: "}") where !inString: depth -= 1
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
