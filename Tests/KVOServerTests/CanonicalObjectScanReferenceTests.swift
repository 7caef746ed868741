import Testing
import KVOJSON

/// The single-loop `CanonicalObjectScan` against the recursive scanner it replaced (kept here as it was,
/// `ReferenceScan`): the same answer and the same counts for canonical text and for text that leaves the
/// canonical form in every way the scan checks (key order, duplicate keys, escapes, whitespace, numbers
/// that are not canonical integers, non-ASCII keys, invalid UTF-8, depth, truncation, stray bytes).
@Suite("canonical object scan against the previous scanner")
struct CanonicalObjectScanReferenceTests {
    private static func both(_ text: [UInt8]) -> (new: CanonicalObjectScan.Counts?, old: CanonicalObjectScan.Counts?) {
        text.withUnsafeBufferPointer { (CanonicalObjectScan.scanObject($0), ReferenceScan.scanObject($0)) }
    }

    @Test func randomTextsGetTheSameAnswerAndCounts() {
        var random = SplitMix64(state: 28)
        var accepted = 0
        var refused = 0
        var mismatches: [String] = []
        for round in 0..<40_000 {
            var text = RandomObjectText.object(&random, canonical: round % 3 == 0)
            switch Int.random(in: 0..<8, using: &random) {
            case 0 where !text.isEmpty:
                text.removeLast(Int.random(in: 1...text.count, using: &random))  // truncated
            case 1 where !text.isEmpty:
                let position = Int.random(in: 0..<text.count, using: &random)
                text[position] = RandomObjectText.strayBytes.randomElement(using: &random)!
            case 2 where !text.isEmpty:
                text.insert(RandomObjectText.strayBytes.randomElement(using: &random)!,
                            at: Int.random(in: 0...text.count, using: &random))
            case 3 where !text.isEmpty:
                text.remove(at: Int.random(in: 0..<text.count, using: &random))
            default: break
            }
            let (new, old) = Self.both(text)
            if new != old, mismatches.count < 5 {
                mismatches.append("\(String(decoding: text, as: UTF8.self)) \(text): new \(String(describing: new)), old \(String(describing: old))")
            }
            if old != nil { accepted += 1 } else { refused += 1 }
        }
        #expect(mismatches.isEmpty, "\(mismatches)")
        // Both kinds well represented.
        #expect(accepted > 8_000 && refused > 8_000, "accepted \(accepted), refused \(refused)")
    }

    /// Every prefix of canonical texts (the scan must refuse each without reading past the end), and the
    /// writer's own output of random objects.
    @Test func prefixesAndWriterOutputGetTheSameAnswer() {
        var random = SplitMix64(state: 29)
        for _ in 0..<1_000 {
            let text = JSONWriter.bytes(CanonicalObjectScanTests.randomObject(&random))
            let (new, old) = Self.both(text)
            #expect(new == old && new != nil, "\(String(decoding: text, as: UTF8.self))")
            for end in 0..<text.count {
                let prefix = Array(text[..<end])
                let (new, old) = Self.both(prefix)
                expectEqual(new, old, "\(String(decoding: prefix, as: UTF8.self))")
            }
        }
    }

    /// Nesting at and past the depth limit, in objects and arrays.
    @Test func depthLimit() {
        for depth in [1, 2, 62, 63, 64, 65, 66, 100] {
            for open in ["[", "{\"k\":"] {
                let close = open == "[" ? "]" : "}"
                for inner in ["", "1", "[]", "{}"] {
                    let text = "{\"a\":" + String(repeating: open, count: depth) + inner
                        + String(repeating: close, count: depth) + "}"
                    let (new, old) = Self.both(Array(text.utf8))
                    expectEqual(new, old, "\(text)")
                }
            }
        }
    }
}

/// Random JSON object text, canonical or (with `canonical: false`) with any of the ways out of the
/// canonical form, mostly one at a time.
enum RandomObjectText {
    static let strayBytes = Array("{}[]\":,-0123456789.eE \t\n\\/tfnaulsrx+".utf8) + [0x00, 0x1F, 0x7F, 0x80, 0xBF, 0xC3, 0xA9, 0xE2, 0xED, 0xF0, 0xF4, 0xFF]

    static func object(_ random: inout SplitMix64, canonical: Bool, depth: Int = 0) -> [UInt8] {
        let memberCount = Int.random(in: 0...(depth > 3 ? 2 : 5), using: &random)
        var keys = (0..<memberCount).map { _ in key(&random, canonical: canonical) }
        let order = Int.random(in: 0..<10, using: &random)
        if canonical || order < 7 {
            keys = Array(Set(keys)).sorted { $0.lexicographicallyPrecedes($1) }
        } else if order == 7, let first = keys.first {
            keys.append(first)  // a duplicate
        }  // otherwise as drawn: any order
        var text: [UInt8] = [UInt8(ascii: "{")]
        for (index, key) in keys.enumerated() {
            if index > 0 { text += separator(&random, ",", canonical: canonical) }
            text += [UInt8(ascii: "\"")] + key + [UInt8(ascii: "\"")]
            text += separator(&random, ":", canonical: canonical)
            text += value(&random, canonical: canonical, depth: depth + 1)
        }
        text.append(UInt8(ascii: "}"))
        return text
    }

    private static func separator(_ random: inout SplitMix64, _ byte: Character, canonical: Bool) -> [UInt8] {
        var text = Array(String(byte).utf8)
        if !canonical && Int.random(in: 0..<30, using: &random) == 0 {
            text.insert([UInt8(ascii: " "), UInt8(ascii: "\n")].randomElement(using: &random)!,
                        at: Int.random(in: 0...1, using: &random))
        }
        return text
    }

    /// Key bytes: short ASCII names with shared prefixes and the bytes around the quote (space, `!`, `#`),
    /// so that prefix order and byte order both matter; non-canonically also escapes and non-ASCII.
    private static func key(_ random: inout SplitMix64, canonical: Bool) -> [UInt8] {
        let pieces = ["a", "b", "ab", "a!", "a ", "a#", "B", "n", "name", "names", "tags", "z9", "~", "\u{7F}", "", "key-long-enough-for-words"]
        var key = Array(pieces.randomElement(using: &random)!.utf8)
        if !canonical {
            switch Int.random(in: 0..<25, using: &random) {
            case 0: key += Array("é".utf8)
            case 1: key += Array("\\n".utf8)
            case 2: key += Array("\\\"".utf8)
            case 3: key.append(0x09)
            default: break
            }
        }
        return key
    }

    private static func value(_ random: inout SplitMix64, canonical: Bool, depth: Int) -> [UInt8] {
        switch Int.random(in: 0..<(depth > 4 ? 7 : 10), using: &random) {
        case 0: return Array(["null", "true", "false"].randomElement(using: &random)!.utf8)
        case 1 where !canonical:
            return Array(["nul", "tru", "fals", "nulll", "True", "n", "t", "f"].randomElement(using: &random)!.utf8)
        case 1, 2: return number(&random, canonical: canonical)
        case 3, 4: return string(&random, canonical: canonical)
        case 5: return Array(String(Int.random(in: -9...9, using: &random)).utf8)
        case 6: return Array("\"object-\(Int.random(in: 0...999_999, using: &random))\"".utf8)
        case 7, 8:
            var text: [UInt8] = [UInt8(ascii: "[")]
            for index in 0..<Int.random(in: 0...4, using: &random) {
                if index > 0 { text += separator(&random, ",", canonical: canonical) }
                text += value(&random, canonical: canonical, depth: depth + 1)
            }
            if !canonical && Int.random(in: 0..<40, using: &random) == 0 { text.append(UInt8(ascii: ",")) }
            text.append(UInt8(ascii: "]"))
            return text
        default: return object(&random, canonical: canonical, depth: depth)
        }
    }

    private static func number(_ random: inout SplitMix64, canonical: Bool) -> [UInt8] {
        let digits = Int.random(in: 1...(canonical ? 18 : 21), using: &random)
        var text = [UInt8(ascii: "1") + UInt8.random(in: 0...8, using: &random)]
        for _ in 1..<max(digits, 1) { text.append(UInt8(ascii: "0") + UInt8.random(in: 0...9, using: &random)) }
        if Bool.random(using: &random) { text.insert(UInt8(ascii: "-"), at: 0) }
        guard !canonical else { return text }
        switch Int.random(in: 0..<12, using: &random) {
        case 0: return Array("-0".utf8)
        case 1: return Array("0".utf8)
        case 2: return [UInt8(ascii: "0")] + text.filter { $0 != UInt8(ascii: "-") }
        case 3: return text + Array(".5".utf8)
        case 4: return text + Array("e3".utf8)
        case 5: return text + Array("E-2".utf8)
        case 6: return Array("-".utf8)
        case 7: return [UInt8(ascii: "+")] + text
        case 8: return Array("-0.0".utf8)
        default: return text
        }
    }

    private static func string(_ random: inout SplitMix64, canonical: Bool) -> [UInt8] {
        let pieces = ["", "a", "object-12", "é", "😀", "ключ", "名前", "\u{7F}", "a longer string of words", " ", "~!#$%&'()*+,-./:;<=>?@[]^_`{|}"]
        var text: [UInt8] = [UInt8(ascii: "\"")]
        for _ in 0..<Int.random(in: 0...3, using: &random) { text += Array(pieces.randomElement(using: &random)!.utf8) }
        if !canonical {
            switch Int.random(in: 0..<16, using: &random) {
            case 0: text += Array("\\n".utf8)
            case 1: text += Array("\\\"".utf8)
            case 2: text += Array("\\u00e9".utf8)
            case 3: text.append(UInt8.random(in: 0...0x1F, using: &random))
            case 4: text += [[0x80], [0xC0, 0x80], [0xC1, 0xBF], [0xED, 0xA0, 0x80], [0xE0, 0x80, 0x80], [0xF0, 0x80, 0x80, 0x80],
                             [0xF4, 0x90, 0x80, 0x80], [0xE2, 0x82], [0xF0, 0x9F, 0x98], [0xC3], [0xFF], [0xF5, 0x80, 0x80, 0x80],
                             [0xED, 0x9F, 0xBF], [0xEE, 0x80, 0x80], [0xF4, 0x8F, 0xBF, 0xBF], [0xE2, 0x28, 0xA1]]
                    .randomElement(using: &random)!
            case 5: text += Array("a".utf8) + [0xE2, 0x82] + Array("bcdefghij".utf8)
            default: break
            }
        }
        text.append(UInt8(ascii: "\""))
        return text
    }
}

/// `CanonicalObjectScan` as it was before the single loop (recursive descent), the reference the new
/// scan must agree with.
enum ReferenceScan {
    static func scanObject(_ bytes: UnsafeBufferPointer<UInt8>) -> CanonicalObjectScan.Counts? {
        guard let base = bytes.baseAddress, bytes.count >= 2, base[0] == UInt8(ascii: "{") else { return nil }
        var scanner = Scanner(bytes: base, count: bytes.count)
        guard scanner.value(), scanner.index == bytes.count else { return nil }
        return scanner.counts
    }

    /// One pass over the text; every method returns false as soon as the text leaves the canonical form.
    fileprivate struct Scanner {
        let bytes: UnsafePointer<UInt8>
        let count: Int
        var index = 0
        var depth = 0
        var counts = CanonicalObjectScan.Counts()

        init(bytes: UnsafePointer<UInt8>, count: Int) {
            self.bytes = bytes
            self.count = count
        }

        /// The byte at `index`, or 0 (never valid where a byte is expected) past the end.
        private func peek() -> UInt8 {
            index < count ? bytes[index] : 0
        }

        mutating func value() -> Bool {
            switch peek() {
            case UInt8(ascii: "{"): return object()
            case UInt8(ascii: "["): return array()
            case UInt8(ascii: "\""): return string(asciiOnly: false)
            case UInt8(ascii: "t"):
                counts.nullsAndTrues += 1
                return literal("true")
            case UInt8(ascii: "f"): return literal("false")
            case UInt8(ascii: "n"):
                counts.nullsAndTrues += 1
                return literal("null")
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return number()
            default: return false
            }
        }

        private mutating func literal(_ text: StaticString) -> Bool {
            let length = text.utf8CodeUnitCount
            guard index + length <= count else { return false }
            for offset in 0..<length where bytes[index + offset] != text.utf8Start[offset] { return false }
            index += length
            return true
        }

        private mutating func object() -> Bool {
            depth += 1
            guard depth <= CanonicalObjectScan.maximumDepth else { return false }
            index += 1
            if peek() == UInt8(ascii: "}") {
                index += 1
                depth -= 1
                return true
            }
            counts.nonEmptyContainers += 1
            var previousKey: Range<Int>?
            while true {
                guard peek() == UInt8(ascii: "\"") else { return false }
                let keyStart = index + 1
                guard string(asciiOnly: true) else { return false }
                let key = keyStart..<(index - 1)
                if let previousKey, !isLess(previousKey, key) { return false }
                previousKey = key
                guard peek() == UInt8(ascii: ":") else { return false }
                index += 1
                guard value() else { return false }
                switch peek() {
                case UInt8(ascii: ","): index += 1
                case UInt8(ascii: "}"):
                    index += 1
                    depth -= 1
                    return true
                default: return false
                }
            }
        }

        private mutating func array() -> Bool {
            depth += 1
            guard depth <= CanonicalObjectScan.maximumDepth else { return false }
            index += 1
            if peek() == UInt8(ascii: "]") {
                index += 1
                depth -= 1
                return true
            }
            counts.nonEmptyContainers += 1
            while true {
                guard value() else { return false }
                switch peek() {
                case UInt8(ascii: ","): index += 1
                case UInt8(ascii: "]"):
                    index += 1
                    depth -= 1
                    return true
                default: return false
                }
            }
        }

        /// Byte order of two ASCII keys (the order of Swift `String` comparison for ASCII text).
        private func isLess(_ left: Range<Int>, _ right: Range<Int>) -> Bool {
            let common = min(left.count, right.count)
            for offset in 0..<common {
                let a = bytes[left.lowerBound + offset]
                let b = bytes[right.lowerBound + offset]
                if a != b { return a < b }
            }
            return left.count < right.count
        }

        /// A string without escapes or control characters; with `asciiOnly`, without bytes above 0x7F;
        /// otherwise those must form valid UTF-8 (which `JSONWriter` writes as they are).
        private mutating func string(asciiOnly: Bool) -> Bool {
            index += 1
            while index < count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    index += 1
                    return true
                }
                if byte == UInt8(ascii: "\\") || byte < 0x20 { return false }
                if byte < 0x80 {
                    index += 1
                    continue
                }
                guard !asciiOnly, let length = utf8SequenceLength() else { return false }
                index += length
            }
            return false
        }

        /// The length of the valid UTF-8 sequence starting at `index` (a byte above 0x7F), or nil.
        private func utf8SequenceLength() -> Int? {
            let first = bytes[index]
            let length: Int
            var low: UInt8 = 0x80
            var high: UInt8 = 0xBF
            switch first {
            case 0xC2...0xDF: length = 2
            case 0xE0: length = 3; low = 0xA0
            case 0xE1...0xEC, 0xEE...0xEF: length = 3
            case 0xED: length = 3; high = 0x9F
            case 0xF0: length = 4; low = 0x90
            case 0xF1...0xF3: length = 4
            case 0xF4: length = 4; high = 0x8F
            default: return nil
            }
            guard index + length <= count else { return nil }
            let second = bytes[index + 1]
            guard second >= low && second <= high else { return nil }
            for offset in 2..<length where bytes[index + offset] & 0xC0 != 0x80 { return nil }
            return length
        }

        /// An integer as `JSONWriter` writes an `Int64`: no leading zero, no `-0`, no fraction or exponent;
        /// at most 18 digits, so that it surely fits.
        private mutating func number() -> Bool {
            let negative = peek() == UInt8(ascii: "-")
            let numberStart = index
            if negative { index += 1 }
            let start = index
            while index < count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") { index += 1 }
            let digits = index - start
            guard digits >= 1, digits <= 18 else { return false }
            if bytes[start] == UInt8(ascii: "0") && (digits > 1 || negative) { return false }
            let next = peek()
            counts.integers += 1
            counts.integerBytes += index - numberStart
            return next != UInt8(ascii: ".") && next != UInt8(ascii: "e") && next != UInt8(ascii: "E")
        }
    }
}
