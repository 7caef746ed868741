/// Appends compact JSON text to a byte buffer.
///
/// Object keys are written sorted, so equal values always encode to equal bytes. The functions are
/// free of shared state: any thread may call them on its own buffer.
public enum JSONWriter {
    /// Appends the encoding of `value` to `buffer`.
    public static func write(_ value: JSONValue, into buffer: inout [UInt8]) {
        switch value {
        case .null: append("null", to: &buffer)
        case let .bool(flag): append(flag ? "true" : "false", to: &buffer)
        case let .int(integer): writeInteger(integer as Int64, into: &buffer)
        case let .double(number): writeDouble(number, into: &buffer)
        case let .string(text): writeString(text, into: &buffer)
        case let .array(elements):
            buffer.append(UInt8(ascii: "["))
            var first = true
            for element in elements {
                if !first { buffer.append(UInt8(ascii: ",")) }
                first = false
                write(element, into: &buffer)
            }
            buffer.append(UInt8(ascii: "]"))
        case let .object(members):
            buffer.append(UInt8(ascii: "{"))
            var first = true
            for key in members.keys.sorted() {
                if !first { buffer.append(UInt8(ascii: ",")) }
                first = false
                writeString(key, into: &buffer)
                buffer.append(UInt8(ascii: ":"))
                write(members[key]!, into: &buffer)
            }
            buffer.append(UInt8(ascii: "}"))
        }
    }

    /// The encoding of `value` as bytes.
    public static func bytes(_ value: JSONValue) -> [UInt8] {
        var buffer: [UInt8] = []
        // A string (the usual value) fits in one allocation unless it needs escapes, rather than
        // growing from 1 byte (the quote) through several reallocations.
        if case let .string(text) = value { buffer.reserveCapacity(text.utf8.count + 2) }
        write(value, into: &buffer)
        return buffer
    }

    /// The encoding of `value` as text.
    public static func string(_ value: JSONValue) -> String {
        String(decoding: bytes(value), as: UTF8.self)
    }

    /// Appends ASCII text verbatim (no quoting): for the fixed parts of a message.
    @inline(__always)
    public static func append(_ text: StaticString, to buffer: inout [UInt8]) {
        buffer.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// Appends a decimal integer without going through `String`.
    @inlinable
    public static func writeInteger<T: BinaryInteger>(_ value: T, into buffer: inout [UInt8]) {
        if let small = Int64(exactly: value) {
            writeInteger(small, into: &buffer)
        } else {
            // Beyond Int64 (UInt64 above Int64.max): the slow, generic way.
            buffer.append(contentsOf: String(value).utf8)
        }
    }

    /// Appends a decimal integer (the concrete fast path: no generic arithmetic; the digits written by
    /// `ByteScratch` and appended in one copy).
    public static func writeInteger(_ value: Int64, into buffer: inout [UInt8]) {
        ByteScratch.append(atMost: 21, to: &buffer) { $0.appendInteger(value) }
    }

    /// Appends a decimal integer.
    @inlinable
    public static func writeInteger(_ value: Int, into buffer: inout [UInt8]) {
        writeInteger(Int64(value), into: &buffer)
    }

    private static func writeDouble(_ value: Double, into buffer: inout [UInt8]) {
        guard value.isFinite else {
            // JSON has no NaN or infinity; the parser never produces them.
            append("null", to: &buffer)
            return
        }
        buffer.append(contentsOf: value.description.utf8)
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Appends a quoted, escaped JSON string.
    public static func writeString(_ text: String, into buffer: inout [UInt8]) {
        buffer.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { utf8 in
            var runStart = 0
            var position = 0
            while position < utf8.count {
                // Eight bytes with nothing to escape are skipped at once (`ByteScan`).
                if position + 8 <= utf8.count, !ByteScan.needsEscaping(ByteScan.word(at: utf8.baseAddress! + position)) {
                    position += 8
                    continue
                }
                let byte = utf8[position]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else {
                    position += 1
                    continue
                }
                buffer.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<position]))
                position += 1
                runStart = position
                buffer.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\""): buffer.append(UInt8(ascii: "\""))
                case UInt8(ascii: "\\"): buffer.append(UInt8(ascii: "\\"))
                case 0x0A: buffer.append(UInt8(ascii: "n"))
                case 0x0D: buffer.append(UInt8(ascii: "r"))
                case 0x09: buffer.append(UInt8(ascii: "t"))
                case 0x08: buffer.append(UInt8(ascii: "b"))
                case 0x0C: buffer.append(UInt8(ascii: "f"))
                default:
                    buffer.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                    buffer.append(hexDigits[Int(byte >> 4)])
                    buffer.append(hexDigits[Int(byte & 0x0F)])
                }
            }
            buffer.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<utf8.count]))
        }
        buffer.append(UInt8(ascii: "\""))
    }
}

extension JSONWriter {
    /// How many bytes `write(value, into:)` appends, without building them: one step per element and
    /// per string byte, no allocation (a non-integral number is formatted once, as `write` does). For
    /// keeping an object's encoded size up to date as it changes.
    public static func encodedLength(of value: JSONValue) -> Int {
        switch value {
        case .null: return 4
        case let .bool(flag): return flag ? 4 : 5
        case let .int(integer): return JSONSizeBound.digitCount(integer)
        case let .double(number): return number.isFinite ? number.description.utf8.count : 4
        case let .string(text): return encodedLength(ofString: text)
        case let .array(elements):
            var length = 2 + Swift.max(elements.count - 1, 0)
            for element in elements { length += encodedLength(of: element) }
            return length
        case let .object(members):
            // Per member: the key, a colon and the value; commas between members.
            var length = 2 + Swift.max(members.count - 1, 0)
            for (key, member) in members { length += encodedLength(ofString: key) + 1 + encodedLength(of: member) }
            return length
        }
    }

    /// How many bytes `writeString(text, into:)` appends: the quotes and every byte, escapes counted.
    /// Runs of eight bytes with nothing to escape are counted at once (`ByteScan`), as `writeString`
    /// skips them: this is on the per-write path (object sizes).
    public static func encodedLength(ofString text: String) -> Int {
        if let length = text.utf8.withContiguousStorageIfAvailable({ encodedLength(ofUTF8: $0) }) { return length }
        var text = text
        return text.withUTF8 { encodedLength(ofUTF8: $0) }
    }

    private static func encodedLength(ofUTF8 utf8: UnsafeBufferPointer<UInt8>) -> Int {
        var length = 2 + utf8.count
        var position = 0
        while position < utf8.count {
            if position + 8 <= utf8.count, !ByteScan.needsEscaping(ByteScan.word(at: utf8.baseAddress! + position)) {
                position += 8
                continue
            }
            switch utf8[position] {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), 0x0A, 0x0D, 0x09, 0x08, 0x0C: length += 1
            case 0..<0x20: length += 5
            default: break
            }
            position += 1
        }
        return length
    }
}
