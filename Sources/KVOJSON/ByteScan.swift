/// Tests on eight bytes at once (SWAR: SIMD within a register), for the parser and the writer to
/// skip runs of ordinary string bytes without looking at each one.
///
/// Each test is exact for "does any of the eight bytes …" in any byte order: `(x - 0x01…) & ~x & 0x80…`
/// is non-zero exactly when some byte of `x` is zero (applied to `word ^ 0x22…` it finds quotes, to
/// `word ^ 0x5C…` backslashes), and `(x - 0x20…) & ~x & 0x80…` exactly when some byte is below 0x20
/// (a byte above 0x7F has its high bit clear in `~x`, and only a byte that really is below 0x20 can
/// borrow). Stateless; any thread.
enum ByteScan {
    private static let ones: UInt64 = 0x0101_0101_0101_0101
    private static let highBits: UInt64 = 0x8080_8080_8080_8080

    /// The eight bytes at `pointer` (any alignment).
    @inline(__always)
    static func word(at pointer: UnsafePointer<UInt8>) -> UInt64 {
        UnsafeRawPointer(pointer).loadUnaligned(as: UInt64.self)
    }

    /// Whether some byte of `word` is a quote, a backslash or a control character (below 0x20): the
    /// bytes a JSON string must escape.
    @inline(__always)
    static func needsEscaping(_ word: UInt64) -> Bool {
        let quotes = word ^ (ones &* UInt64(UInt8(ascii: "\"")))
        let backslashes = word ^ (ones &* UInt64(UInt8(ascii: "\\")))
        let found = ((quotes &- ones) & ~quotes) | ((backslashes &- ones) & ~backslashes)
            | ((word &- ones &* 0x20) & ~word)
        return found & highBits != 0
    }

    /// Whether some byte of `word` is above 0x7F (part of a multi-byte UTF-8 sequence, or invalid).
    @inline(__always)
    static func hasNonASCII(_ word: UInt64) -> Bool {
        word & highBits != 0
    }

    /// The eight bytes at `pointer` with the first byte lowest, whatever the machine's byte order (for
    /// `firstSpecialByte`).
    @inline(__always)
    static func littleEndianWord(at pointer: UnsafePointer<UInt8>) -> UInt64 {
        UInt64(littleEndian: UnsafeRawPointer(pointer).loadUnaligned(as: UInt64.self))
    }

    /// Where the first byte of `word` (from `littleEndianWord`) that a JSON string cannot hold as it is
    /// (a quote, a backslash or a control character) or that is above 0x7F sits: 0 to 7, or 8 when there is
    /// none. Exact: the tests can flag a byte wrongly only above a byte truly flagged (a borrow carries upwards).
    @inline(__always)
    static func firstSpecialByte(_ word: UInt64) -> Int {
        let quotes = word ^ (ones &* UInt64(UInt8(ascii: "\"")))
        let backslashes = word ^ (ones &* UInt64(UInt8(ascii: "\\")))
        let found = ((quotes &- ones) & ~quotes) | ((backslashes &- ones) & ~backslashes)
            | ((word &- ones &* 0x20) & ~word) | word
        return (found & highBits).trailingZeroBitCount >> 3
    }

    /// Length of the valid UTF-8 sequence starting at `position` (`position < count`), or nil: RFC 3629, no
    /// overlong forms, no surrogates, nothing above U+10FFFF. 1 for an ASCII byte. The one definition the
    /// parser, the scanner and the canonical-object check share.
    static func utf8SequenceLength(_ bytes: UnsafePointer<UInt8>, count: Int, at position: Int) -> Int? {
        let lead = bytes[position]
        let length: Int
        var lower: UInt8 = 0x80
        var upper: UInt8 = 0xBF
        switch lead {
        case 0x00...0x7F: return 1
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; lower = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; upper = 0x9F
        case 0xF0: length = 4; lower = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; upper = 0x8F
        default: return nil
        }
        guard position + length <= count else { return nil }
        let second = bytes[position + 1]
        guard second >= lower, second <= upper else { return nil }
        for offset in 2..<max(length, 2) where bytes[position + offset] & 0xC0 != 0x80 {
            return nil
        }
        return length
    }
}
