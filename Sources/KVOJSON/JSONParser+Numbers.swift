#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Numbers: an integer literal is an `Int64`, or past 64 bits refused (`integerOutOfRange`, never rounded:
/// `WideIntegers.refused`, requests) or the nearest double (`.nearestDouble`, other programs' JSON); a fraction
/// or an exponent makes a double (strtod), and one too large for a double is refused.
extension JSONParser {
    /// Reads a number. With `needsValue` false (`skipValue`: only the checks) a non-integral number that cannot
    /// reach a double's range (integer digits plus exponent at most 300) is not converted: the result is `.null`.
    mutating func parseNumber(needsValue: Bool = true) throws(JSONParseError) -> JSONValue {
        let start = index
        var isInteger = true
        var integerDigits = 0
        var exponent = 0
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { throw error(.syntax("invalid number")) }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if index < bytes.count, isDigit(bytes[index]) { throw error(.syntax("leading zero in a number")) }
        } else {
            let digitsStart = index
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
            integerDigits = index - digitsStart
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw error(.syntax("invalid number")) }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            var negative = false
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                negative = bytes[index] == UInt8(ascii: "-")
                index += 1
            }
            guard index < bytes.count, isDigit(bytes[index]) else { throw error(.syntax("invalid number")) }
            while index < bytes.count, isDigit(bytes[index]) {
                if exponent < 100_000 { exponent = exponent * 10 + Int(bytes[index] - UInt8(ascii: "0")) }
                index += 1
            }
            if negative { exponent = -exponent }
        }
        let text = UnsafeBufferPointer(rebasing: bytes[start..<index])
        if isInteger {
            if let integer = parseInt64(text) {
                if integer == 0 && text.count != 1 { compact = false }  // -0 is written 0
                return .int(integer)
            }
            // Past 64 bits an integer would become a double, rounded (2^63 + 1 reads as 2^63): refused where
            // asked (requests), else read as the nearest double below.
            if wideIntegers == .nearestDouble { return try nearestDouble(text, at: start) }
            let literal = String(decoding: text.prefix(64), as: UTF8.self) + (text.count > 64 ? "…" : "")
            throw JSONParseError(reason: .integerOutOfRange(literal: literal, field: nil), offset: start)
        }
        if !needsValue && integerDigits + exponent <= 300 {
            compact = false  // as `nearestDouble` does; the value is below 10^300, so finite
            return .null
        }
        return try nearestDouble(text, at: start)
    }

    /// The double nearest to the number `text` (at `start`); one too large for a double is refused.
    private mutating func nearestDouble(_ text: UnsafeBufferPointer<UInt8>, at start: Int) throws(JSONParseError) -> JSONValue {
        compact = false  // written as `Double.description`, which need not be these bytes
        guard let value = JSONParser.doubleValue(text), value.isFinite else {
            throw JSONParseError(reason: .syntax("number out of range"), offset: start)
        }
        return .double(value)
    }

    /// strtod of the number `text` (a JSON number's bytes), on a NUL-terminated copy on the stack when short; nil
    /// when strtod does not read all of it.
    static func doubleValue(_ text: UnsafeBufferPointer<UInt8>) -> Double? {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: text.count + 1) { copy -> Double? in
            guard let source = text.baseAddress, let base = copy.baseAddress else { return nil }
            UnsafeMutableRawPointer(base).copyMemory(from: source, byteCount: text.count)
            base[text.count] = 0
            var end: UnsafeMutablePointer<CChar>? = nil
            let value = strtod(base, &end)
            guard end == base + text.count else { return nil }
            return value
        }
    }

    func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    func parseInt64(_ text: UnsafeBufferPointer<UInt8>) -> Int64? {
        var negative = false
        var position = 0
        if text[0] == UInt8(ascii: "-") {
            negative = true
            position = 1
        }
        var magnitude: UInt64 = 0
        while position < text.count {
            let (shifted, overflow1) = magnitude.multipliedReportingOverflow(by: 10)
            let (added, overflow2) = shifted.addingReportingOverflow(UInt64(text[position] - UInt8(ascii: "0")))
            if overflow1 || overflow2 { return nil }
            magnitude = added
            position += 1
        }
        if negative {
            if magnitude == UInt64(Int64.max) + 1 { return Int64.min }
            guard magnitude <= UInt64(Int64.max) else { return nil }
            return -Int64(magnitude)
        }
        guard magnitude <= UInt64(Int64.max) else { return nil }
        return Int64(magnitude)
    }
}
