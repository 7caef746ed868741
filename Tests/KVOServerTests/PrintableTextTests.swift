import Testing
import KVOJSON

@Suite struct PrintableTextTests {
    @Test(arguments: [
        ("plain id", "plain id"),
        ("evil\nroot", "evil\\nroot"),
        ("a\r\tb", "a\\r\\tb"),
        ("\u{1B}[31mred", "\\u{1B}[31mred"),
        ("bell\u{07}", "bell\\u{7}"),
        ("nul\u{0}x", "nul\\u{0}x"),
        ("del\u{7F}c1\u{85}", "del\\u{7F}c1\\u{85}"),
        ("ls\u{2028}rlo\u{202E}", "ls\\u{2028}rlo\\u{202E}"),
        ("back\\n", "back\\\\n"),
        ("é€😀", "é€😀"),
    ])
    func escapesControlCharacters(input: String, expected: String) {
        expectEqual(PrintableText.escaped(input), expected)
        expectEqual(PrintableText.isPlain(input), (input == expected))
    }

    @Test func cutsLongTextAndStatesItsLength() {
        let long = String(repeating: "a", count: 1_048_576)
        let shown = PrintableText.escaped(long, limit: 10)
        expectEqual(shown, "aaaaaaaaaa…(1048576 bytes)")
        expectEqual(PrintableText.escaped("exactly10!", limit: 10), "exactly10!")
        expectEqual(PrintableText.escaped(String(repeating: "\n", count: 3), limit: 2), "\\n\\n…(3 bytes)")
    }

    @Test func escapedTextHasNoControlCharacters() {
        var generator = SplitMix64(state: 7)
        for _ in 0..<200 {
            var scalars = String.UnicodeScalarView()
            for _ in 0..<40 {
                let raw = UInt32(generator.next() % 0x2100)
                if let scalar = Unicode.Scalar(raw) { scalars.append(scalar) }
            }
            let shown = PrintableText.escaped(String(scalars), limit: 1_000)
            for scalar in shown.unicodeScalars {
                #expect(!(scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar == "\u{2028}"))
            }
        }
    }
}
