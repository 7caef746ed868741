/// The key table (`KeyTable`: a protocol's fixed member names, handed back without building a `String`) and
/// the look-up of a key in it at a string's opening quote.
extension JSONParser {
    /// Object keys the parser hands back as given strings instead of building a new `String` for
    /// each: for the fixed names of a protocol's messages (`op`, `id`, `object`, …), which every line
    /// repeats. Only names of at most eight bytes are kept; a key is looked up when it has at most
    /// eight bytes and no escape, by its bytes packed into one word, in a small open-addressed table (a
    /// multiply, a shift and usually one comparison, against some 180 instructions to build a `String`).
    /// Immutable; any thread. A class: the parser passes it along by one reference count, not one per array.
    public final class KeyTable: Sendable {
        /// Slot `i` holds a name's word (first byte lowest; 0 for an empty slot: a name has no NUL) and its
        /// position in `names` (the names kept, in the order given).
        private let words: [UInt64]
        private let positions: [Int]
        private let names: [String]
        /// For each name kept, its index in the list given to `init`.
        private let given: [Int]
        /// log2 of the slot count.
        private let bits: Int

        public init(_ names: [String]) {
            let kept = names.indices.filter { !names[$0].isEmpty && names[$0].utf8.count <= 8 && !names[$0].utf8.contains(0) }
            let short = kept.map { names[$0] }
            self.names = short
            given = kept
            var bits = 4
            while 1 << bits < 4 * short.count { bits += 1 }
            self.bits = bits
            var words = [UInt64](repeating: 0, count: 1 << bits)
            var positions = [Int](repeating: 0, count: 1 << bits)
            for (position, name) in short.enumerated() {
                let word = name.utf8.enumerated().reduce(UInt64(0)) { $0 | UInt64($1.element) << (8 * UInt64($1.offset)) }
                var slot = KeyTable.slot(of: word, bits: bits)
                while words[slot] != 0 && words[slot] != word { slot = (slot + 1) & ((1 << bits) - 1) }
                words[slot] = word
                positions[slot] = position
            }
            self.words = words
            self.positions = positions
        }

        @inline(__always)
        private static func slot(of word: UInt64, bits: Int) -> Int {
            Int(truncatingIfNeeded: (word &* 0x9E37_79B9_7F4A_7C15) >> UInt64(64 - bits))
        }

        /// The name whose bytes packed into a word (first byte lowest, the rest zero) are `word`, if there is one.
        func name(word: UInt64) -> String? {
            position(word: word).map { names[$0] }
        }

        /// The name whose bytes packed into a word are `word` and its index in the list given to `init`, if there is one.
        func entry(word: UInt64) -> (name: String, index: Int)? {
            position(word: word).map { (names[$0], given[$0]) }
        }

        /// Where the name spelled by `text` is in the list given to `init`, if the table kept it (names of at
        /// most eight bytes); no `String` is made.
        public func index(of text: UnsafeBufferPointer<UInt8>) -> Int? {
            guard !text.isEmpty, text.count <= 8 else { return nil }
            var word: UInt64 = 0
            for (offset, byte) in text.enumerated() {
                if byte == 0 { return nil }
                word |= UInt64(byte) << (8 * UInt64(offset))
            }
            return position(word: word).map { given[$0] }
        }

        private func position(word: UInt64) -> Int? {
            let mask = (1 << bits) - 1
            var slot = KeyTable.slot(of: word, bits: bits)
            while true {
                let stored = words[slot]
                if stored == word { return positions[slot] }
                if stored == 0 { return nil }
                slot = (slot + 1) & mask
            }
        }
    }

    /// At a string's opening quote: when the string is at most eight bytes of plain ASCII (no
    /// escape, no control character) and one of `table`'s names, that name, with the string consumed;
    /// otherwise nil, with nothing consumed.
    mutating func knownKey(in table: KeyTable) -> String? {
        knownKeyEntry(in: table)?.name
    }

    /// `knownKey`, with the name's index in the list given to the table's `init`.
    mutating func knownKeyEntry(in table: KeyTable) -> (name: String, index: Int)? {
        let start = index + 1
        let length: Int
        var word: UInt64
        if start + 8 <= bytes.count {
            // Eight bytes at once: where the first quote (or anything else special) is.
            word = ByteScan.littleEndianWord(at: bytes.baseAddress! + start)
            let special = ByteScan.firstSpecialByte(word)
            if special == 8 {
                guard start + 8 < bytes.count, bytes[start + 8] == UInt8(ascii: "\"") else { return nil }
                length = 8
            } else {
                guard bytes[start + special] == UInt8(ascii: "\"") else { return nil }
                length = special
                word &= (1 << UInt64(8 * length)) - 1
            }
        } else {
            // Near the end of the input: byte by byte.
            var end = start
            word = 0
            while true {
                guard end < bytes.count, end - start <= 8 else { return nil }
                let byte = bytes[end]
                if byte == UInt8(ascii: "\"") { break }
                guard byte >= 0x20, byte < 0x80, byte != UInt8(ascii: "\\"), end - start < 8 else { return nil }
                word |= UInt64(byte) << (8 * UInt64(end - start))
                end += 1
            }
            length = end - start
        }
        guard length > 0, let entry = table.entry(word: word) else { return nil }
        index = start + length + 1
        return entry
    }
}
