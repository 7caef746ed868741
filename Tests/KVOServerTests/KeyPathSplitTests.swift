import Testing
@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// Issue 13: ASCII key paths are split at their dot bytes (no grapheme breaking); the keys must be exactly
/// those of the split by Character that every other key path still gets.
@Suite("KeyPath splitting")
struct KeyPathSplitTests {
    @Test("keys are those of the split by Character",
          arguments: ["v", "a.b.c", "address.city", "items.@sum.price", "é.b", "日本.語", "a.\u{301}b", "x\u{301}.y", "a.b\r\n.c"])
    func keysMatchTheCharacterSplit(_ text: String) throws {
        let expected = text.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        expectEqual(try KeyPath(text).components, expected)
        expectEqual(try KeyPath(text).string, text)
    }

    @Test("a dot followed by a combining mark is not a separator")
    func combiningMarkAfterADot() throws {
        expectEqual(try KeyPath("a.\u{301}b").components.count, 1)
    }

    @Test("empty keys are refused", arguments: ["a..b", ".a", "a.", ".", "é..b"])
    func emptyKeys(_ text: String) {
        #expect(throws: KVOError.self) { try KeyPath(text) }
    }
}
