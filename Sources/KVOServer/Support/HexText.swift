/// Bytes as lowercase hexadecimal text and back (token ids and hashes, digests, the running hash of the
/// cluster's stream). Any thread.
enum HexText {
    private static let digits = Array("0123456789abcdef".utf8)

    /// Two lowercase hex digits per byte.
    static func encode(_ bytes: some Collection<UInt8>) -> String {
        var text: [UInt8] = []
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 15)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The value of one hex digit (either case); nil for any other byte.
    static func digitValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// The bytes `text` spells (either case); nil when it is not an even number of hex digits.
    static func decode(_ text: some Collection<UInt8>) -> [UInt8]? {
        guard text.count % 2 == 0 else { return nil }
        let value = digitValue
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.count / 2)
        var index = text.startIndex
        while index != text.endIndex {
            let next = text.index(after: index)
            guard let high = value(text[index]), let low = value(text[next]) else { return nil }
            bytes.append(high << 4 | low)
            index = text.index(after: next)
        }
        return bytes
    }
}
