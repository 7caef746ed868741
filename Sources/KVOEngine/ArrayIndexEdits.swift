import KVOJSON

/// Inserting or removing many elements of an array at once, in one pass over the array: O(array +
/// indexes) once the indexes are sorted, where inserting or removing one index at a time moves the tail of
/// the array once per index (O(array × indexes): 4.5 s to remove 40,000 of 400,000 elements).
///
/// Used by `CollectionMutation.apply` (after it has checked the indexes) and by `ArrayChangeRecord.apply`
/// (history replay and undo). Both edits are tolerant in the way the one-at-a-time loops they replace were:
/// an index that would be out of range at its turn is skipped. Pure functions; any thread.
enum ArrayIndexEdits {
    /// Inserts `values[i]` so that it ends up at `indexes[i]` of the result, as inserting them one at a
    /// time in ascending index order would. `indexes` ascending and distinct; an index past the end of the
    /// array at its turn (more than one past the last element placed so far) is skipped with its value.
    static func insert(_ values: [JSONValue], at indexes: [Int], into elements: inout [JSONValue]) {
        let count = min(indexes.count, values.count)
        guard count > 0 else { return }
        var result: [JSONValue] = []
        result.reserveCapacity(elements.count + count)
        var nextOriginal = 0
        for pairIndex in 0..<count {
            let target = indexes[pairIndex]
            // Copy the original elements that come before this insertion.
            let needed = target - result.count
            if needed > 0 {
                let available = min(needed, elements.count - nextOriginal)
                result.append(contentsOf: elements[nextOriginal..<(nextOriginal + available)])
                nextOriginal += available
            }
            guard result.count == target else { continue }  // past the end at its turn: skipped
            result.append(values[pairIndex])
        }
        result.append(contentsOf: elements[nextOriginal...])
        elements = result
    }

    /// Removes the elements at `indexes` (ascending, distinct) of the array as it is, as removing them one
    /// at a time from the highest down would; indexes out of range are skipped.
    static func remove(at indexes: [Int], from elements: inout [JSONValue]) {
        guard let first = indexes.first(where: { $0 >= 0 }), first < elements.count else { return }
        var nextIndex = indexes.firstIndex(of: first)!
        var write = first
        for read in first..<elements.count {
            if nextIndex < indexes.count, indexes[nextIndex] == read {
                nextIndex += 1
                continue
            }
            elements.swapAt(write, read)
            write += 1
        }
        elements.removeLast(elements.count - write)
    }
}
