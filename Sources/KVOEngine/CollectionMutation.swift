import KVOJSON
import KVOModel

/// What a to-many change did, in Cocoa's terms: the kind, the affected indexes (ascending) and the
/// elements removed or replaced (`old`) and inserted or put in (`new`).
public struct CollectionChange: Equatable, Sendable {
    let kind: ChangeKind
    let indexes: [Int]
    let old: [JSONValue]
    let new: [JSONValue]
}

/// An insertion, removal or replacement on an array (NSMutableArray's insertObjects:atIndexes:,
/// removeObjectsAtIndexes:, replaceObjectsAtIndexes:withObjects:).
///
/// `apply` checks everything before it changes anything: a refused mutation leaves the array as it was.
public enum CollectionMutation: Equatable, Sendable {
    /// Insert `values` so that they end up at `indexes` of the resulting array; nil indexes append.
    case insert(indexes: [Int]?, values: [JSONValue])
    /// Remove the elements at `indexes` of the current array.
    case remove(indexes: [Int])
    /// Replace the elements at `indexes` with `values`.
    case replace(indexes: [Int], values: [JSONValue])

    /// The values it puts in (none for a removal).
    var values: [JSONValue] {
        switch self {
        case let .insert(_, values), let .replace(_, values): return values
        case .remove: return []
        }
    }

    func apply(to array: inout [JSONValue]) throws(KVOError) -> CollectionChange {
        switch self {
        case let .insert(indexes, values):
            guard !values.isEmpty else { throw KVOError(.badRequest, "nothing to insert") }
            guard let indexes else {
                let start = array.count
                array.append(contentsOf: values)
                return CollectionChange(kind: .insertion, indexes: Array(start..<array.count), old: [], new: values)
            }
            let pairs = try CollectionMutation.pair(indexes, values)
            // Indexes refer to the resulting array: each, in ascending order, may be at most one past
            // the end of the array as it is when that element goes in.
            for (offset, pair) in pairs.enumerated() where pair.index > array.count + offset {
                throw KVOError(.outOfRange, "insertion index \(pair.index) is out of range (\(array.count + offset) elements)")
            }
            let sortedIndexes = pairs.map(\.index)
            let sortedValues = pairs.map(\.value)
            ArrayIndexEdits.insert(sortedValues, at: sortedIndexes, into: &array)
            return CollectionChange(kind: .insertion, indexes: sortedIndexes, old: [], new: sortedValues)
        case let .remove(indexes):
            let sorted = try CollectionMutation.checkedIndexes(indexes, count: array.count)
            let removed = sorted.map { array[$0] }
            ArrayIndexEdits.remove(at: sorted, from: &array)
            return CollectionChange(kind: .removal, indexes: sorted, old: removed, new: [])
        case let .replace(indexes, values):
            _ = try CollectionMutation.checkedIndexes(indexes, count: array.count)
            let pairs = try CollectionMutation.pair(indexes, values)
            let old = pairs.map { array[$0.index] }
            for pair in pairs { array[pair.index] = pair.value }
            return CollectionChange(kind: .replacement, indexes: pairs.map(\.index), old: old, new: pairs.map(\.value))
        }
    }

    /// Indexes and values matched up and sorted by index; indexes must be distinct.
    private static func pair(_ indexes: [Int], _ values: [JSONValue]) throws(KVOError) -> [(index: Int, value: JSONValue)] {
        guard indexes.count == values.count else {
            throw KVOError(.badRequest, "\(indexes.count) indexes but \(values.count) values")
        }
        let pairs = zip(indexes, values).map { (index: $0, value: $1) }.sorted { $0.index < $1.index }
        try checkDistinct(pairs.map(\.index))
        return pairs
    }

    /// Sorted, distinct, in range for an array of `count` elements.
    private static func checkedIndexes(_ indexes: [Int], count: Int) throws(KVOError) -> [Int] {
        guard !indexes.isEmpty else { throw KVOError(.badRequest, "no indexes given") }
        let sorted = indexes.sorted()
        try checkDistinct(sorted)
        if let bad = sorted.first(where: { $0 < 0 || $0 >= count }) {
            throw KVOError(.outOfRange, "index \(bad) is out of range (\(count) elements)")
        }
        return sorted
    }

    private static func checkDistinct(_ sorted: [Int]) throws(KVOError) {
        if let negative = sorted.first, negative < 0 { throw KVOError(.outOfRange, "index \(negative) is out of range") }
        for (a, b) in zip(sorted, sorted.dropFirst()) where a == b {
            throw KVOError(.badRequest, "index \(a) is given twice")
        }
    }
}
