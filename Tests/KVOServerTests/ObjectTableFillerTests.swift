import Testing
import KVOJSON

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// `ObjectTableFiller` gives the table and id list that `ObjectTable.setPacked`, row after row on one
/// thread, gives: for no rows, fewer than a batch, exactly a batch, many batches (so the loader waits for
/// room in the queue), repeated ids (the later row wins, the id is listed once, where it was first added),
/// and a load abandoned part way (`finish` still ends the inserting thread).
@Suite struct ObjectTableFillerTests {
    /// Object `index`'s value in these tests.
    private static func value(_ index: Int, _ round: Int = 0) -> [String: JSONValue] {
        ["n": .int(Int64(index)), "round": .int(Int64(round)), "name": .string("object-\(index)")]
    }

    /// The table and new ids that setting `rows` one after another on this thread gives.
    private static func sequentialFill(_ rows: [(String, [String: JSONValue])]) -> (ObjectTable, [String]) {
        var table = ObjectTable()
        var ids: [String] = []
        for (id, members) in rows where table.setPacked(id, members: members) { ids.append(id) }
        return (table, ids)
    }

    private static func fill(_ rows: [(String, [String: JSONValue])], expectedRows: Int) -> (ObjectTable, [String]) {
        let filler = ObjectTableFiller(expectedRows: expectedRows)
        for (id, members) in rows { filler.add(id, PackedObject.make(encoding: members)) }
        let (table, ids) = filler.finish()
        return (table, ids)
    }

    @Test(arguments: [0, 1, ObjectTableFiller.batchSize - 1, ObjectTableFiller.batchSize,
                      ObjectTableFiller.batchSize * (ObjectTableFiller.maximumQueuedBatches + 3) + 17])
    func fillsAsSetPackedRowByRowDoes(rows count: Int) {
        let rows = (0..<count).map { ("object-\($0)", Self.value($0)) }
        let (table, ids) = Self.fill(rows, expectedRows: count)
        let (expectedTable, expectedIDs) = Self.sequentialFill(rows)
        expectEqual(table.count, count)
        expectEqual(ids, expectedIDs)
        expectEqual(table, expectedTable)
        #expect(rows.allSatisfy { !table.isLive($0.0) })
    }

    @Test func aLaterRowForTheSameIDReplacesTheEarlierAndTheIDIsListedOnce() {
        var random = SplitMix64(state: 7)
        // Ids repeat within a batch and across batches; fewer expected rows than come (the table grows).
        let rows = (0..<(ObjectTableFiller.batchSize * 3)).map { round -> (String, [String: JSONValue]) in
            let index = Int(random.next() % 2_000)
            return ("id-\(index)", Self.value(index, round))
        }
        let (table, ids) = Self.fill(rows, expectedRows: 100)
        let (expectedTable, expectedIDs) = Self.sequentialFill(rows)
        expectEqual(Set(ids).count, ids.count)
        expectEqual(ids, expectedIDs)
        expectEqual(table, expectedTable)
        let lastRound = Dictionary(rows.enumerated().map { ($0.element.0, $0.offset) }, uniquingKeysWith: max)
        for (id, round) in lastRound {
            expectEqual(table[id]?["round"], .int(Int64(round)))
        }
    }

    @Test func finishingAnAbandonedFillEndsItsThread() {
        // What `load` does when a row is corrupt: rows added so far, then `finish`, its result dropped.
        for count in [0, 5, ObjectTableFiller.batchSize * 2 + 3] {
            let filler = ObjectTableFiller(expectedRows: 1_000_000)
            for index in 0..<count { filler.add("object-\(index)", PackedObject.make(encoding: Self.value(index))) }
            let (table, _) = filler.finish()
            expectEqual(table.count, count)
        }
    }
}
