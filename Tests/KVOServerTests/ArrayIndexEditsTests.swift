import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// The one-pass multi-index `insert` and `remove` (issue 10, item 5) against the one-at-a-time semantics
/// they replace, on seeded random arrays and index sets: the same resulting array, the same change
/// record, the same refusals, and undo through the history record restoring the original.
@Suite struct ArrayIndexEditsTests {
    /// The semantics before: insert in ascending index order, one at a time.
    private static func naiveInsert(_ values: [JSONValue], at indexes: [Int], into elements: inout [JSONValue]) {
        for (index, value) in zip(indexes, values) where index >= 0 && index <= elements.count {
            elements.insert(value, at: index)
        }
    }

    /// The semantics before: remove from the highest index down, one at a time.
    private static func naiveRemove(at indexes: [Int], from elements: inout [JSONValue]) {
        for index in indexes.reversed() where index >= 0 && index < elements.count { elements.remove(at: index) }
    }

    /// `count` distinct indexes in 0..<bound, ascending, chosen with `random`.
    private static func distinctIndexes(_ count: Int, below bound: Int, _ random: inout SplitMix64) -> [Int] {
        var chosen = Set<Int>()
        while chosen.count < min(count, bound) { chosen.insert(Int.random(in: 0..<bound, using: &random)) }
        return chosen.sorted()
    }

    @Test(arguments: [1, 2, 3, 42, 1234])
    func insertAndRemoveAgreeWithOneAtATime(seed: UInt64) {
        var random = SplitMix64(state: seed)
        for _ in 0..<300 {
            let length = Int.random(in: 0...40, using: &random)
            let original = (0..<length).map { JSONValue.int(Int64($0)) }
            // Insertion indexes refer to the result; some past the end at their turn (the tolerant path).
            let insertCount = Int.random(in: 0...12, using: &random)
            let insertIndexes = Self.distinctIndexes(insertCount, below: length + insertCount + 3, &random)
            let values = insertIndexes.map { JSONValue.string("v\($0)") }
            var expected = original
            Self.naiveInsert(values, at: insertIndexes, into: &expected)
            var actual = original
            ArrayIndexEdits.insert(values, at: insertIndexes, into: &actual)
            expectEqual(actual, expected, "insert \(insertIndexes) into \(length)")

            let removeIndexes = Self.distinctIndexes(Int.random(in: 0...12, using: &random), below: length + 3, &random)
            expected = original
            Self.naiveRemove(at: removeIndexes, from: &expected)
            actual = original
            ArrayIndexEdits.remove(at: removeIndexes, from: &actual)
            expectEqual(actual, expected, "remove \(removeIndexes) from \(length)")
        }
    }

    @Test(arguments: [7, 99])
    func mutationsAgreeWithOneAtATimeAndUndo(seed: UInt64) throws {
        var random = SplitMix64(state: seed)
        for _ in 0..<300 {
            let length = Int.random(in: 0...30, using: &random)
            let original = (0..<length).map { JSONValue.int(Int64($0)) }
            // Unsorted indexes as a client sends them, sometimes out of range.
            let count = Int.random(in: 1...8, using: &random)
            var indexes = Self.distinctIndexes(count, below: length + count + 1, &random)
            indexes.shuffle(using: &random)
            let values = indexes.map { JSONValue.string("n\($0)") }

            var array = original
            do {
                let change = try CollectionMutation.insert(indexes: indexes, values: values).apply(to: &array)
                var expected = original
                let pairs = zip(indexes, values).sorted { $0.0 < $1.0 }
                for (index, value) in pairs { expected.insert(value, at: index) }
                expectEqual(array, expected)
                #expect(change.indexes == pairs.map(\.0) && change.new == pairs.map(\.1))
                ArrayChangeRecord(path: ["a"], kind: change.kind, indexes: change.indexes, old: change.old,
                                  new: change.new).apply(to: &array, forward: false)
                expectEqual(array, original, "undo of the insertion")
            } catch {
                expectEqual(array, original, "a refused insertion changes nothing")
                let sorted = indexes.sorted()
                #expect(sorted.enumerated().contains { $0.element > length + $0.offset })
            }

            array = original
            let removal = indexes.filter { $0 < length }
            guard !removal.isEmpty else { continue }
            let change = try CollectionMutation.remove(indexes: removal).apply(to: &array)
            var expected = original
            for index in removal.sorted().reversed() { expected.remove(at: index) }
            expectEqual(array, expected)
            #expect(change.indexes == removal.sorted() && change.old == removal.sorted().map { original[$0] })
            ArrayChangeRecord(path: ["a"], kind: change.kind, indexes: change.indexes, old: change.old,
                              new: change.new).apply(to: &array, forward: false)
            expectEqual(array, original, "undo of the removal")
        }
    }
}
