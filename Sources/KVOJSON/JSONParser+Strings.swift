/// Strings: a string without escapes is a slice of the input (eight plain ASCII bytes skipped at a time); one
/// with escapes is decoded into a scratch buffer, and is not compact (`JSONWriter` may write it otherwise).
/// Invalid UTF-8, control characters, bad escapes and lone surrogates are refused.
extension JSONParser {
    /// Length of the valid UTF-8 sequence starting at `position` (within the input), or nil
    /// (`ByteScan.utf8SequenceLength`).
    func validUTF8SequenceLength(at position: Int) -> Int? {
        ByteScan.utf8SequenceLength(bytes.baseAddress!, count: bytes.count, at: position)
    }

    mutating func parseString() throws(JSONParseError) -> String {
        index += 1  // opening quote
        let start = index
        // Fast path: no escapes, so the string is a slice of the input. Eight bytes that are all
        // plain ASCII (no quote, backslash, control character or byte above 0x7F) are skipped at once;
        // otherwise the next (up to) eight are looked at one by one.
        scan: while index < bytes.count {
            if index + 8 <= bytes.count, case let word = ByteScan.word(at: bytes.baseAddress! + index),
               !ByteScan.needsEscaping(word), !ByteScan.hasNonASCII(word) {
                index += 8
                continue
            }
            let end = min(index + 8, bytes.count)
            while index < end {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    let slice = UnsafeBufferPointer(rebasing: bytes[start..<index])
                    index += 1
                    return String(decoding: slice, as: UTF8.self)
                }
                if byte == UInt8(ascii: "\\") { break scan }
                if byte < 0x20 { throw error(.syntax("control character in a string")) }
                if byte < 0x80 {
                    index += 1
                } else {
                    guard let length = validUTF8SequenceLength(at: index) else { throw error(.invalidUTF8) }
                    index += length
                }
            }
        }
        guard index < bytes.count else { throw error(.syntax("unterminated string")) }
        // Slow path: copy what we have, then decode escapes (which `JSONWriter` may write otherwise).
        compact = false
        var scratch = Array(UnsafeBufferPointer(rebasing: bytes[start..<index]))
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return String(decoding: scratch, as: UTF8.self)
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { throw error(.syntax("unterminated escape")) }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""): scratch.append(0x22)
                case UInt8(ascii: "\\"): scratch.append(0x5C)
                case UInt8(ascii: "/"): scratch.append(0x2F)
                case UInt8(ascii: "b"): scratch.append(0x08)
                case UInt8(ascii: "f"): scratch.append(0x0C)
                case UInt8(ascii: "n"): scratch.append(0x0A)
                case UInt8(ascii: "r"): scratch.append(0x0D)
                case UInt8(ascii: "t"): scratch.append(0x09)
                case UInt8(ascii: "u"):
                    let scalar = try parseUnicodeEscape()
                    appendUTF8(scalar, to: &scratch)
                default:
                    index -= 1
                    throw error(.syntax("invalid escape"))
                }
            default:
                if byte < 0x20 { throw error(.syntax("control character in a string")) }
                if byte < 0x80 {
                    scratch.append(byte)
                    index += 1
                } else {
                    guard let length = validUTF8SequenceLength(at: index) else { throw error(.invalidUTF8) }
                    scratch.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[index..<(index + length)]))
                    index += length
                }
            }
        }
        throw error(.syntax("unterminated string"))
    }

    /// The value of one hex digit of a `\\u` escape (either case); nil for any other byte. Shared with
    /// `JSONCanonicalizer`.
    @inline(__always)
    static func hexDigitValue(_ byte: UInt8) -> UInt32? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(byte - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(byte - UInt8(ascii: "A") + 10)
        default: nil
        }
    }

    mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw error(.syntax("truncated \\u escape")) }
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let digit = JSONParser.hexDigitValue(bytes[index]) else { throw error(.syntax("invalid \\u escape")) }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    mutating func parseUnicodeEscape() throws(JSONParseError) -> Unicode.Scalar {
        let first = try parseHex4()
        if first >= 0xD800, first <= 0xDBFF {
            guard index + 2 <= bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
            else { throw error(.syntax("lone surrogate in \\u escape")) }
            index += 2
            let second = try parseHex4()
            guard second >= 0xDC00, second <= 0xDFFF else { throw error(.syntax("lone surrogate in \\u escape")) }
            let combined = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
            return Unicode.Scalar(combined)!
        }
        guard let scalar = Unicode.Scalar(first) else { throw error(.syntax("lone surrogate in \\u escape")) }
        return scalar
    }

    private func appendUTF8(_ scalar: Unicode.Scalar, to buffer: inout [UInt8]) {
        UTF8.encode(scalar) { buffer.append($0) }
    }
}
