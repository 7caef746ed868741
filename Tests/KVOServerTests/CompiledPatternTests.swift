import Dispatch
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// PCRE2 patterns (issue 10, item 3): the dialect and search semantics, compile errors, the work limit on
/// catastrophic patterns, and matching one shared pattern from many threads at once (each with its own
/// scratch).
@Suite struct CompiledPatternTests {
    @Test func searchesAnywhereUnlessAnchored() throws {
        expectEqual(try CompiledPattern("b+").matches("abc"), .matched)
        expectEqual(try CompiledPattern("^b").matches("abc"), .notMatched)
        expectEqual(try CompiledPattern("^[a-z ]+$").matches("ab c"), .matched)
        expectEqual(try CompiledPattern("^[a-z ]+$").matches("ab1"), .notMatched)
        expectEqual(try CompiledPattern("").matches(""), .matched)
        expectEqual(try CompiledPattern("^$").matches(""), .matched)
        // UTF mode with Unicode properties: one code point per '.', Unicode digits and letters.
        expectEqual(try CompiledPattern("^.$").matches("é"), .matched)
        expectEqual(try CompiledPattern("^\\d+$").matches("١٢٣"), .matched)
        expectEqual(try CompiledPattern("^\\w+$").matches("héllo"), .matched)
        // Lookbehind is PCRE2's; a NUL inside the string is just a character.
        expectEqual(try CompiledPattern("(?<=a)b").matches("ab"), .matched)
        expectEqual(try CompiledPattern("a\u{0}b").matches("xa\u{0}b"), .matched)
    }

    @Test func compileErrorsSayWhyAndWhere() {
        #expect(throws: CompiledPattern.PatternError.self) { try CompiledPattern("(a") }
        #expect(throws: CompiledPattern.PatternError.self) { try CompiledPattern("\\C") }
        do {
            _ = try CompiledPattern("a{2,1}")
            Issue.record("a{2,1} compiled")
        } catch {
            #expect(error.reason.hasPrefix("does not compile: ") && error.reason.contains("offset"), "\(error.reason)")
        }
    }

    @Test func catastrophicPatternsStopAtTheWorkLimit() throws {
        expectEqual(try CompiledPattern("^(a+)+$").matches(String(repeating: "a", count: 40) + "!"), .exceededWorkLimit)
        expectEqual(try CompiledPattern("\\s+$").matches(String(repeating: " ", count: 16_384) + "x"), .exceededWorkLimit)
        expectEqual(try CompiledPattern("(?:a|aa)+$").matches(String(repeating: "a", count: 2_000) + "!"), .exceededWorkLimit)
        // A pattern cannot raise the limit for itself.
        #expect(try CompiledPattern("(*LIMIT_MATCH=100000000)^(a+)+$").matches(String(repeating: "a", count: 40) + "!")
                == .exceededWorkLimit)
        // The same patterns on strings they match, or short ones, answer as before.
        expectEqual(try CompiledPattern("^(a+)+$").matches(String(repeating: "a", count: 40)), .matched)
        expectEqual(try CompiledPattern("^(a+)+$").matches("aaaa!"), .notMatched)
        expectEqual(try CompiledPattern("\\s+$").matches(String(repeating: " ", count: 16_384)), .matched)
    }

    /// Issue 11: the matches of one write share one budget, the k-th getting 1,000,000 / k steps; outside a
    /// write, and in the next write, a match gets the whole budget again.
    @Test func theMatchesOfOneWriteShareOneBudget() throws {
        expectEqual(CompiledPattern.stepBudget(forMatch: 1), 1_000_000)
        expectEqual(CompiledPattern.stepBudget(forMatch: 4), 250_000)
        expectEqual(CompiledPattern.stepBudget(forMatch: 10_000_000), 1)
        // About 300,000 steps, then a match through the second branch.
        let pattern = try CompiledPattern("^(?:(a+)+$|a)")
        let slow = String(repeating: "a", count: 18) + "!"
        let scratch = PatternMatchScratch.current
        expectEqual((0..<8).map { _ in pattern.matches(slow) }, Array(repeating: .matched, count: 8), "outside a write")
        scratch.beginWrite()
        let inWrite = (0..<8).map { _ in pattern.matches(slow) }
        scratch.endWrite()
        expectEqual(inWrite.first, .matched, "\(inWrite)")
        expectEqual(inWrite.last, .exceededWorkLimit, "\(inWrite)")
        scratch.beginWrite()
        expectEqual(pattern.matches(slow), .matched, "a new write starts with the whole budget")
        scratch.endWrite()
    }

    /// The backtracking memory is bounded too (8 MiB heap, 100,000 levels): a match that needs more
    /// stops with the work limit.
    @Test func backtrackingMemoryIsBounded() throws {
        let pattern = try CompiledPattern("^(a|b)*$")
        expectEqual(pattern.matches(String(repeating: "a", count: 1_000)), .matched)
        // Each repetition leaves a backtracking point: 120,000 of them pass the 100,000-level depth limit.
        expectEqual(pattern.matches(String(repeating: "a", count: 120_000)), .exceededWorkLimit)
    }

    /// An anchored pattern is tried at one start position, which gets the whole budget: a rule with a
    /// repeated group still checks a long value (it used to get budget / length per start position and
    /// refused a 10 KB list), while the catastrophic anchored pattern above still stops.
    @Test func anchoredPatternsGetTheWholeBudgetAtTheirOneStart() throws {
        let list = try CompiledPattern("^([a-z]+,)*[a-z]+$")
        for count in [10, 2_500, 25_000] {
            let value = Array(repeating: "abc", count: count).joined(separator: ",")
            expectEqual(list.matches(value), .matched, "\(count) items")
            expectEqual(list.matches(value + ","), .notMatched, "\(count) items and a comma")
        }
        // Unanchored, the same rule shares the budget among the start positions (documented).
        let unanchored = try CompiledPattern("([a-z]+,)*[a-z]+;")
        expectEqual(unanchored.matches(Array(repeating: "abc", count: 25_000).joined(separator: ",") + ",;"), .exceededWorkLimit)
    }

    @Test func oneSharedPatternMatchesFromManyThreads() throws {
        let pattern = try CompiledPattern("^([a-z]+)-(\\d+)$")
        let results = ResultsBox(count: 64)
        DispatchQueue.concurrentPerform(iterations: 64) { index in
            var agreed = true
            for round in 0..<200 {
                let good = "item-\(index * 1000 + round)"
                let bad = "item-\(round)x"
                agreed = agreed && pattern.matches(good) == .matched && pattern.matches(bad) == .notMatched
            }
            results.set(index, agreed)
        }
        #expect(results.all)
    }
}

/// Per-iteration outcomes written from `concurrentPerform` (each iteration writes its own slot).
private final class ResultsBox: @unchecked Sendable {
    private var values: [Bool]
    init(count: Int) { values = Array(repeating: false, count: count) }
    func set(_ index: Int, _ value: Bool) { values.withUnsafeMutableBufferPointer { $0[index] = value } }
    var all: Bool { values.allSatisfy { $0 } }
}
