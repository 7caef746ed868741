import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// The limits of one expression evaluation (issue 10, item 4), at the engine level: nested computed
/// properties share one work budget whatever the memo holds (so `get` and observers agree), sibling
/// computed properties a key path reads each get their own, built values are capped at 1 MiB, and a
/// chain of `+` builds its string in one buffer.
@Suite struct ExpressionBudgetTests {
    let engine = KVOEngine()

    /// `term + term + …` with `count` terms.
    private static func repeated(_ term: String, _ count: Int) -> String {
        Array(repeating: term, count: count).joined(separator: " + ")
    }

    @Test func nestedComputedPropertiesShareOneBudgetWhateverTheMemoHolds() throws {
        // Each level reads the one below 200 times: 200^k evaluations without the memo. With it, the
        // work is still counted as if each read evaluated again (c1 ~400 steps, c2 ~80,000, c3 ~16
        // million), so the third level is over the 200,000-step budget.
        try engine.defineClass(json: """
            {"name":"D","properties":{"n":{"type":"integer"}},
             "computed":{"c1":"\(Self.repeated("n", 200))","c2":"\(Self.repeated("c1", 200))",
                         "c3":"\(Self.repeated("c2", 200))","c4":"len(str(c3))"}}
            """)
        try engine.create("d", of: "D", ["n": 1])
        expectEqual(try engine.value("d", "c1"), 200)
        expectEqual(try engine.value("d", "c2"), 40_000)
        expectEqual(try engine.value("d", "c3"), .null, "200 reads of c2, each costing what c2 cost: over the budget")
        expectEqual(try engine.value("d", "c4"), .null)
        // The same answers with the memo cold (an observer's reading after a write) as warm (a get).
        _ = try engine.observe("d", "c3", [.new])
        let notifications = try engine.set("d", "n", 2)
        #expect(notifications.isEmpty, "c3 stays null: no event")
        expectEqual(try engine.value("d", "c2"), 80_000)
        expectEqual(try engine.value("d", "c3"), .null)
    }

    @Test func siblingComputedPropertiesOfAFanOutHaveTheirOwnBudgets() throws {
        // 60 steps or so each; 4,000 of them read through one key path are over one budget, not over theirs.
        try engine.defineClass(json: """
            {"name":"T","properties":{"p":{"type":"integer"}},"computed":{"t":"\(Self.repeated("p", 30))"}}
            """)
        var refs: [JSONValue] = []
        for index in 0..<4_000 {
            try engine.create("t\(index)", of: "T", ["p": 1])
            refs.append(.reference(to: "t\(index)"))
        }
        try engine.create("list", ["items": .array(refs)])
        expectEqual(try engine.value("list", "items.@sum.t"), 120_000)
    }

    @Test func builtValuesAreCappedAndConcatenationIsOneBuffer() throws {
        let piece = JSONValue.string(String(repeating: "x", count: 4_096))
        func evaluate(_ source: String) throws(ExpressionError) -> JSONValue {
            try Expression.parse(source).evaluate(variables: ["0": piece]) { _ in .null }
        }
        expectEqual(try evaluate(Self.repeated("$0", 256)).stringValue?.utf8.count, 1 << 20)
        #expect(throws: ExpressionError.self) { try evaluate(Self.repeated("$0", 257)) }
        do {
            _ = try evaluate("[" + Array(repeating: "$0", count: 300).joined(separator: ", ") + "]")
            Issue.record("an array of 300 x 4 KB was built")
        } catch {
            #expect(error.kind == .limit && error.message.contains("larger than"), "\(error)")
        }
        expectEqual(try evaluate("1 + 2 + 'x' + 3"), "3x3", "folded left to right as before")
        expectEqual(try evaluate("'a' + null + 'b'"), .null)
        #expect(throws: ExpressionError.self) { try evaluate("'a' + [1]") }
        expectEqual(try evaluate("len(str([$0, $0]))"), .int(2 * 4_098 + 3))
    }

    @Test func searchingLongStringsCostsByTheByte() throws {
        // String search is character by character (0.14 s for 512 KB in a release build): `contains` over
        // strings takes a step per 2 bytes, so one search of 400 KB or more is over the budget.
        func contains(_ haystack: Int, _ needle: Int) throws(ExpressionError) -> JSONValue {
            try Expression.parse("contains($0, $1)").evaluate(variables: [
                "0": .string(String(repeating: "a", count: haystack)),
                "1": .string(String(repeating: "a", count: needle) + "b"),
            ]) { _ in .null }
        }
        expectEqual(try contains(100_000, 1_000), false)
        do {
            _ = try contains(300_000, 150_000)
            Issue.record("a 450 KB search was within the budget")
        } catch {
            #expect(error.kind == .limit && error.message.contains("work limit"), "\(error)")
        }
    }
}
