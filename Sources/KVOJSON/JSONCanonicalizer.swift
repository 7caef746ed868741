#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes the canonical text of a JSON value (exactly the bytes `JSONWriter.write` makes of the parsed value)
/// straight from the value's text, in one pass that builds no `JSONValue` (issue 44): how a `set`'s value that a
/// client wrote its own way (keys in insertion order, white space, escapes, `1e3`, `-0`) becomes `CanonicalText`
/// and takes the same path as one written canonically.
///
/// Strings are copied eight bytes at a time; escapes are decoded and written as `JSONWriter` writes the
/// character (`\/` and `\u00e9` as the character, `\"`, `\\` and control characters escaped, `\u001f` lowercase);
/// integers are copied (`-0` becomes `0`); other numbers become `Double.description`, as `JSONWriter` writes
/// them. An object's members are written as they come and, only when their keys were not in ascending order
/// (`String <`), sorted in place afterwards; of repeated keys the last value counts (as in the parser's
/// dictionary). Where the tree would be the only safe judge the pass gives up and the caller parses instead:
/// a key that needs an escape in canonical form (a quote, a backslash or a control character), repeated keys
/// that are not plain ASCII (Swift keeps the first one's spelling, canonically equivalent to the last), and
/// input that is not valid JSON (callers pass text `JSONParser` has already checked).
///
/// A short-lived value over borrowed memory, made and ended by `canonicalText(of:)`; any thread.
public struct JSONCanonicalizer {
    /// Why a pass stopped: the output did not fit the room given (try again with more), or the pass cannot
    /// tell the canonical text (the caller parses the value instead).
    enum Stop: Error {
        case outOfRoom
        case giveUp
    }

    private let input: UnsafePointer<UInt8>
    private let inputCount: Int
    private var index = 0
    private let output: UnsafeMutablePointer<UInt8>
    private let capacity: Int
    private var count = 0
    /// A stack of (member start, key end) offsets in `output`, two `Int`s per member, for the members of the
    /// objects being written (an inner object's above its outer one's).
    private let members: UnsafeMutablePointer<Int>
    private let memberCapacity: Int
    private var memberCount = 0

    private init(input: UnsafeBufferPointer<UInt8>, output: UnsafeMutableBufferPointer<UInt8>,
                 members: UnsafeMutableBufferPointer<Int>) {
        self.input = input.baseAddress!
        self.inputCount = input.count
        self.output = output.baseAddress!
        self.capacity = output.count
        self.members = members.baseAddress!
        self.memberCapacity = members.count / 2
    }

    /// The canonical text of the one JSON value in `text` (white space around it allowed), or nil when the pass
    /// cannot tell it (see the type's comment): then parse the text and write the value with `JSONWriter`.
    public static func canonicalText(of text: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        guard !text.isEmpty else { return nil }
        // A member takes at least four bytes (`"":0`), so this many fit every object of the text at once.
        let memberSlots = 2 * (text.count / 4 + 2)
        // Strings and integers never grow; a non-integral number can (`1e3` is `1000.0`): the first room fits
        // all but number-heavy values, the second any value (a number of n >= 3 bytes writes at most 24, < 5n + 8).
        var room = text.count + 64
        while true {
            let result: Result<[UInt8], Stop> = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: room) { output in
                withUnsafeTemporaryAllocation(of: Int.self, capacity: memberSlots) { members in
                    var writer = JSONCanonicalizer(input: text, output: output, members: members)
                    do throws(Stop) {
                        try writer.writeValue()
                        writer.skipWhitespace()
                        guard writer.index == writer.inputCount else { throw Stop.giveUp }
                    } catch {
                        return .failure(error)
                    }
                    return .success(Array(UnsafeBufferPointer(start: writer.output, count: writer.count)))
                }
            }
            switch result {
            case let .success(bytes): return bytes
            case .failure(.outOfRoom) where room < 5 * text.count + 64: room = 5 * text.count + 64
            case .failure: return nil
            }
        }
    }

    // MARK: - Output

    @inline(__always)
    private func ensureRoom(_ bytes: Int) throws(Stop) {
        if count + bytes > capacity { throw Stop.outOfRoom }
    }

    @inline(__always)
    private mutating func put(_ byte: UInt8) throws(Stop) {
        try ensureRoom(1)
        output[count] = byte
        count += 1
    }

    @inline(__always)
    private mutating func put(_ text: StaticString) throws(Stop) {
        try ensureRoom(text.utf8CodeUnitCount)
        (output + count).update(from: text.utf8Start, count: text.utf8CodeUnitCount)
        count += text.utf8CodeUnitCount
    }

    @inline(__always)
    private mutating func copyInput(_ length: Int) throws(Stop) {
        guard index + length <= inputCount else { throw Stop.giveUp }
        try ensureRoom(length)
        (output + count).update(from: input + index, count: length)
        count += length
        index += length
    }

    // MARK: - Values

    @inline(__always)
    private mutating func skipWhitespace() {
        while index < inputCount {
            switch input[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func writeValue() throws(Stop) {
        skipWhitespace()
        guard index < inputCount else { throw Stop.giveUp }
        switch input[index] {
        case UInt8(ascii: "{"): try writeObject()
        case UInt8(ascii: "["): try writeArray()
        case UInt8(ascii: "\""): _ = try writeString()
        case UInt8(ascii: "t"), UInt8(ascii: "n"): try copyInput(4)
        case UInt8(ascii: "f"): try copyInput(5)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try writeNumber()
        default: throw Stop.giveUp
        }
    }

    private mutating func writeArray() throws(Stop) {
        try put(UInt8(ascii: "["))
        index += 1
        skipWhitespace()
        if index < inputCount, input[index] == UInt8(ascii: "]") {
            index += 1
            try put(UInt8(ascii: "]"))
            return
        }
        while true {
            try writeValue()
            skipWhitespace()
            guard index < inputCount else { throw Stop.giveUp }
            let byte = input[index]
            index += 1
            try put(byte)
            if byte == UInt8(ascii: "]") { return }
            guard byte == UInt8(ascii: ",") else { throw Stop.giveUp }
        }
    }

    private mutating func writeObject() throws(Stop) {
        let objectStart = count
        try put(UInt8(ascii: "{"))
        index += 1
        skipWhitespace()
        if index < inputCount, input[index] == UInt8(ascii: "}") {
            index += 1
            try put(UInt8(ascii: "}"))
            return
        }
        let base = memberCount
        var sorted = true
        var plainKeys = true
        var previousPrefix: UInt64 = 0
        while true {
            skipWhitespace()
            guard index < inputCount, input[index] == UInt8(ascii: "\""), memberCount < memberCapacity else { throw Stop.giveUp }
            let memberStart = count
            let key = try writeString()
            // A key written with an escape would sort by its escaped bytes here: the tree decides instead.
            if key.escaped { throw Stop.giveUp }
            if key.nonASCII { plainKeys = false }
            members[2 * memberCount] = memberStart
            members[2 * memberCount + 1] = count
            memberCount += 1
            if sorted {
                // Plain keys compare by their first eight bytes, and in full only when those are equal.
                let prefix = keyPrefix(memberCount - 1)
                if memberCount - base > 1 {
                    if !plainKeys || prefix == previousPrefix {
                        if compareKeys(memberCount - 2, memberCount - 1, plain: plainKeys) >= 0 { sorted = false }
                    } else if prefix < previousPrefix {
                        sorted = false
                    }
                }
                previousPrefix = prefix
            }
            skipWhitespace()
            guard index < inputCount, input[index] == UInt8(ascii: ":") else { throw Stop.giveUp }
            index += 1
            try put(UInt8(ascii: ":"))
            try writeValue()
            skipWhitespace()
            guard index < inputCount else { throw Stop.giveUp }
            let byte = input[index]
            index += 1
            if byte == UInt8(ascii: "}") { break }
            guard byte == UInt8(ascii: ",") else { throw Stop.giveUp }
            try put(UInt8(ascii: ","))
        }
        if !sorted { try sortMembers(objectStart: objectStart, base: base, plain: plainKeys) }
        memberCount = base
        try put(UInt8(ascii: "}"))
    }

    /// The key (between its quotes) of the member at stack slot `slot`.
    @inline(__always)
    private func keyBytes(_ slot: Int) -> UnsafeBufferPointer<UInt8> {
        let start = members[2 * slot] + 1
        return UnsafeBufferPointer(start: output + start, count: members[2 * slot + 1] - 1 - start)
    }

    /// The order of the keys at stack slots `left` and `right` (negative, zero, positive) as `String <` orders them:
    /// byte by byte when `plain` (plain ASCII keys: their first eight bytes big-endian first, which decides most
    /// pairs), else as strings.
    private func compareKeys(_ left: Int, _ right: Int, plain: Bool) -> Int {
        let leftKey = keyBytes(left)
        let rightKey = keyBytes(right)
        if plain {
            let leftPrefix = JSONCanonicalizer.prefix(leftKey)
            let rightPrefix = JSONCanonicalizer.prefix(rightKey)
            if leftPrefix != rightPrefix { return leftPrefix < rightPrefix ? -1 : 1 }
            let common = Swift.min(leftKey.count, rightKey.count)
            if common > 8 {
                let order = memcmp(leftKey.baseAddress! + 8, rightKey.baseAddress! + 8, common - 8)
                if order != 0 { return Int(order) }
            }
            return leftKey.count - rightKey.count
        }
        let leftString = String(decoding: leftKey, as: UTF8.self)
        let rightString = String(decoding: rightKey, as: UTF8.self)
        return leftString < rightString ? -1 : (leftString == rightString ? 0 : 1)
    }

    /// A key's first eight bytes as a big-endian number (zeros after a shorter key: a key holds no zero byte, which
    /// canonical form escapes), so that comparing two prefixes compares the keys' first eight bytes.
    @inline(__always)
    private static func prefix(_ key: UnsafeBufferPointer<UInt8>) -> UInt64 {
        if key.count >= 8 { return UInt64(bigEndian: UnsafeRawPointer(key.baseAddress!).loadUnaligned(as: UInt64.self)) }
        var value: UInt64 = 0
        for offset in 0..<key.count { value |= UInt64(key[offset]) << UInt64(56 - 8 * offset) }
        return value
    }

    /// The prefix (`prefix(_:)`) of the key at stack slot `slot`.
    @inline(__always)
    private func keyPrefix(_ slot: Int) -> UInt64 {
        JSONCanonicalizer.prefix(keyBytes(slot))
    }

    /// Rewrites the members of the object written from `objectStart` (its `{`, then the members on the stack
    /// from `base`, separated by commas, up to `count`) in ascending key order; of equal keys the last one stays.
    private mutating func sortMembers(objectStart: Int, base: Int, plain: Bool) throws(Stop) {
        let memberTotal = memberCount - base
        let segmentStart = objectStart + 1
        let segmentLength = count - segmentStart
        let writer = self
        let written: Int? = withUnsafeTemporaryAllocation(of: Int.self, capacity: memberTotal) { order in
            withUnsafeTemporaryAllocation(of: UInt64.self, capacity: memberTotal) { prefixes in
                // Each key's first eight bytes once (prefixes[slot - base]), so that most comparisons are one of numbers.
                for offset in 0..<memberTotal {
                    order[offset] = base + offset
                    prefixes[offset] = plain ? writer.keyPrefix(base + offset) : 0
                }
                // Ascending keys; equal keys in input order (the slot breaks the tie), so the last of them is kept.
                let before = { (left: Int, right: Int) -> Bool in
                    let leftPrefix = prefixes[left - base]
                    let rightPrefix = prefixes[right - base]
                    if leftPrefix != rightPrefix { return leftPrefix < rightPrefix }
                    let order = writer.compareKeys(left, right, plain: plain)
                    return order < 0 || (order == 0 && left < right)
                }
                if memberTotal <= 16 {
                    for position in 1..<memberTotal {
                        let slot = order[position]
                        let slotPrefix = prefixes[slot - base]
                        var hole = position
                        while hole > 0 {
                            let previousPrefix = prefixes[order[hole - 1] - base]
                            // The prefixes decide unless they are equal (then the whole keys, then the slots).
                            if previousPrefix < slotPrefix || (previousPrefix == slotPrefix && !before(slot, order[hole - 1])) { break }
                            order[hole] = order[hole - 1]
                            hole -= 1
                        }
                        order[hole] = slot
                    }
                } else {
                    var sortable = order
                    sortable.sort(by: before)
                }
                return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: segmentLength) { copy in
                    var length = 0
                    for position in 0..<memberTotal {
                        let slot = order[position]
                        if position + 1 < memberTotal, prefixes[slot - base] == prefixes[order[position + 1] - base],
                           writer.compareKeys(slot, order[position + 1], plain: plain) == 0 {
                            // The same key again: only plain ASCII keys are the same bytes (else Swift keeps the
                            // first one's spelling with the last one's value: the tree decides).
                            guard plain else { return nil }
                            continue
                        }
                        let start = writer.members[2 * slot]
                        let end = slot + 1 < writer.memberCount ? writer.members[2 * (slot + 1)] - 1 : writer.count
                        if length > 0 {
                            copy[length] = UInt8(ascii: ",")
                            length += 1
                        }
                        (copy.baseAddress! + length).update(from: writer.output + start, count: end - start)
                        length += end - start
                    }
                    writer.output.advanced(by: segmentStart).update(from: copy.baseAddress!, count: length)
                    return length
                }
            }
        }
        guard let written else { throw Stop.giveUp }
        count = segmentStart + written
    }

    /// Writes the string at `index` (its opening quote) as `JSONWriter.writeString` writes its characters, and
    /// says whether the written text has an escape and whether it has a byte above 0x7F.
    private mutating func writeString() throws(Stop) -> (escaped: Bool, nonASCII: Bool) {
        try put(UInt8(ascii: "\""))
        index += 1
        var escaped = false
        var nonASCII = false
        while true {
            // The run up to the next quote, backslash or control character is copied at once; eight bytes with
            // none of them are passed over at a time.
            let runStart = index
            while index + 8 <= inputCount {
                let word = ByteScan.word(at: input + index)
                if ByteScan.needsEscaping(word) { break }
                if ByteScan.hasNonASCII(word) { nonASCII = true }
                index += 8
            }
            while index < inputCount {
                let byte = input[index]
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 { break }
                if byte >= 0x80 { nonASCII = true }
                index += 1
            }
            let runLength = index - runStart
            try ensureRoom(runLength)
            if runLength <= 16 {
                // A short run (most keys) byte by byte: cheaper than calling memcpy.
                var offset = 0
                while offset < runLength {
                    output[count + offset] = input[runStart + offset]
                    offset += 1
                }
            } else {
                (output + count).update(from: input + runStart, count: runLength)
            }
            count += runLength
            guard index < inputCount else { throw Stop.giveUp }
            let byte = input[index]
            index += 1
            if byte == UInt8(ascii: "\"") {
                try put(byte)
                return (escaped, nonASCII)
            }
            guard byte == UInt8(ascii: "\\"), index < inputCount else { throw Stop.giveUp }  // a raw control character
            let escape = input[index]
            index += 1
            let scalar: UInt32
            switch escape {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): scalar = UInt32(escape)
            case UInt8(ascii: "b"): scalar = 0x08
            case UInt8(ascii: "f"): scalar = 0x0C
            case UInt8(ascii: "n"): scalar = 0x0A
            case UInt8(ascii: "r"): scalar = 0x0D
            case UInt8(ascii: "t"): scalar = 0x09
            case UInt8(ascii: "u"): scalar = try unicodeEscape()
            default: throw Stop.giveUp
            }
            if try writeCharacter(scalar) { escaped = true }
            if scalar >= 0x80 { nonASCII = true }
        }
    }

    /// Writes one character of a string as `JSONWriter.writeString` does; true when it wrote an escape.
    private mutating func writeCharacter(_ scalar: UInt32) throws(Stop) -> Bool {
        switch scalar {
        case 0x22: try put("\\\""); return true
        case 0x5C: try put("\\\\"); return true
        case 0x0A: try put("\\n"); return true
        case 0x0D: try put("\\r"); return true
        case 0x09: try put("\\t"); return true
        case 0x08: try put("\\b"); return true
        case 0x0C: try put("\\f"); return true
        case 0..<0x20:
            try put("\\u00")
            try put(JSONCanonicalizer.hexDigit(scalar >> 4))
            try put(JSONCanonicalizer.hexDigit(scalar & 0x0F))
            return true
        case 0..<0x80:
            try put(UInt8(scalar))
        case 0..<0x800:
            try ensureRoom(2)
            output[count] = UInt8(0xC0 | (scalar >> 6))
            output[count + 1] = UInt8(0x80 | (scalar & 0x3F))
            count += 2
        case 0..<0x10000:
            try ensureRoom(3)
            output[count] = UInt8(0xE0 | (scalar >> 12))
            output[count + 1] = UInt8(0x80 | ((scalar >> 6) & 0x3F))
            output[count + 2] = UInt8(0x80 | (scalar & 0x3F))
            count += 3
        default:
            try ensureRoom(4)
            output[count] = UInt8(0xF0 | (scalar >> 18))
            output[count + 1] = UInt8(0x80 | ((scalar >> 12) & 0x3F))
            output[count + 2] = UInt8(0x80 | ((scalar >> 6) & 0x3F))
            output[count + 3] = UInt8(0x80 | (scalar & 0x3F))
            count += 4
        }
        return false
    }

    private static func hexDigit(_ value: UInt32) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + UInt8(value) : UInt8(ascii: "a") + UInt8(value - 10)
    }

    /// The character of a `\u` escape (after the `u`), a surrogate pair read as one; a lone surrogate gives up.
    private mutating func unicodeEscape() throws(Stop) -> UInt32 {
        let first = try hex4()
        if first >= 0xD800, first <= 0xDBFF {
            guard index + 2 <= inputCount, input[index] == UInt8(ascii: "\\"), input[index + 1] == UInt8(ascii: "u")
            else { throw Stop.giveUp }
            index += 2
            let second = try hex4()
            guard second >= 0xDC00, second <= 0xDFFF else { throw Stop.giveUp }
            return 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
        }
        guard first < 0xD800 || first > 0xDFFF else { throw Stop.giveUp }
        return first
    }

    private mutating func hex4() throws(Stop) -> UInt32 {
        guard index + 4 <= inputCount else { throw Stop.giveUp }
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let digit = JSONParser.hexDigitValue(input[index]) else { throw Stop.giveUp }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    /// An integer is copied (it fits `Int64` and has no leading zero: the parser checked; `-0` becomes `0`);
    /// any other number becomes the nearest double's `description`, as `JSONWriter` writes it.
    private mutating func writeNumber() throws(Stop) {
        let start = index
        var integral = true
        while index < inputCount, JSONCanonicalizer.isNumberByte(input[index]) {
            switch input[index] {
            case UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E"): integral = false
            default: break
            }
            index += 1
        }
        let length = index - start
        if integral {
            if length == 2, input[start] == UInt8(ascii: "-"), input[start + 1] == UInt8(ascii: "0") {
                try put(UInt8(ascii: "0"))
                return
            }
            index = start
            try copyInput(length)
            return
        }
        if JSONCanonicalizer.isShortestDecimal(UnsafeBufferPointer(start: input + start, count: length)) {
            index = start
            try copyInput(length)
            return
        }
        guard let value = JSONParser.doubleValue(UnsafeBufferPointer(start: input + start, count: length)),
              value.isFinite else { throw Stop.giveUp }
        let text = value.description
        try ensureRoom(text.utf8.count)
        for byte in text.utf8 {
            output[count] = byte
            count += 1
        }
    }

    /// Whether the number `text` is already what `Double.description` writes for its value, so that it can be
    /// copied without strtod and formatting (prices, coordinates, ratios: `2.5`, `0.25`, `51.5074`, `100.0`):
    /// `-?I.F` without an exponent, `I` without a leading zero and at most 15 digits, `F` without a trailing zero
    /// (or `F` is `0`), a value of at least 0.1 in magnitude (`I` is not `0`, or `F` starts with a non-zero digit,
    /// or `F` is `0`), and at most 15 significant digits. Such a decimal is the only one of at most 15 digits that
    /// reads as its double (doubles hold 15 decimal digits exactly), so it is the shortest, and below 10^15 and
    /// from 0.1 up `description` writes it in this notation.
    static func isShortestDecimal(_ text: UnsafeBufferPointer<UInt8>) -> Bool {
        var position = text.first == UInt8(ascii: "-") ? 1 : 0
        let integerStart = position
        while position < text.count, text[position] >= UInt8(ascii: "0"), text[position] <= UInt8(ascii: "9") { position += 1 }
        let integerDigits = position - integerStart
        guard integerDigits >= 1, integerDigits <= 15, position < text.count, text[position] == UInt8(ascii: ".") else { return false }
        let integerIsZero = text[integerStart] == UInt8(ascii: "0")
        if integerIsZero && integerDigits > 1 { return false }
        position += 1
        let fractionStart = position
        while position < text.count, text[position] >= UInt8(ascii: "0"), text[position] <= UInt8(ascii: "9") { position += 1 }
        let fractionDigits = position - fractionStart
        guard position == text.count, fractionDigits >= 1 else { return false }
        if fractionDigits == 1 && text[fractionStart] == UInt8(ascii: "0") { return true }  // X.0
        guard text[text.count - 1] != UInt8(ascii: "0") else { return false }
        if integerIsZero {
            return text[fractionStart] != UInt8(ascii: "0") && fractionDigits <= 15
        }
        return integerDigits + fractionDigits <= 15
    }

    @inline(__always)
    static func isNumberByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "+"), UInt8(ascii: "."),
             UInt8(ascii: "e"), UInt8(ascii: "E"): return true
        default: return false
        }
    }
}
