/// The ids of the store's objects in sorted order, kept up to date as objects are created and
/// deleted, so that a `list` page costs O(log n + page size) instead of a sort of every id.
///
/// A two-level B-tree: a sorted array of sorted chunks, each at most `chunkCapacity` ids and, except
/// for a lone chunk, at least `chunkMinimum`. A lookup is a binary search over the chunks' last ids,
/// then one within a chunk. An insertion or removal moves at most `chunkCapacity` ids inside one
/// chunk; splitting or merging a chunk (at most once every `chunkCapacity / 4` changes to it) also
/// moves the chunk references after it, n / `chunkCapacity` pointers: amortised well under one
/// pointer move per change. Memory: each chunk reserves `chunkCapacity` `String`s (16 bytes each,
/// sharing the storage of the objects' keys) and holds between a quarter of that and all of it (all
/// when built from a load): 16 bytes per id after a load, at most 64 in the worst case.
///
/// Ids compare as Swift `String`s do (the order of `Dictionary` keys' `sorted()`): canonically
/// equivalent strings are one id. A value type owned by `KVOEngine`; the server's loop thread, the
/// engine's only caller, is the only one that touches it.
package struct SortedObjectIDs {
    /// Ids per chunk at most; a chunk that grows past it splits in two.
    static let chunkCapacity = 512
    /// A chunk that shrinks below it merges with a neighbour (and splits again if that is too big).
    static let chunkMinimum = chunkCapacity / 4

    /// Non-empty sorted chunks; every id of a chunk is less than every id of the next.
    private var chunks: [[String]] = []
    /// Number of ids.
    private(set) var count = 0

    init() {}

    /// The ids of `ids` (unique), sorted once: not at all when they come in order already (the store's
    /// loader reads them in byte order, which is this order for the usual ids; checked, n - 1 comparisons).
    package init<Ids: Sequence<String>>(_ ids: Ids) {
        var sorted = Array(ids)
        if !SortedObjectIDs.isStrictlyIncreasing(sorted) { sorted.sort() }
        count = sorted.count
        // Chunks full, of nearly equal sizes (so that the last is not a runt): a load's ids cost 16 bytes
        // each instead of 21 at 3/4; the first insertion into a full chunk splits it (moving half of its ids
        // and the chunk references after it), once per chunk.
        let chunkCount = (sorted.count + Self.chunkCapacity - 1) / Self.chunkCapacity
        chunks.reserveCapacity(chunkCount)
        var start = 0
        for index in 0..<chunkCount {
            let end = sorted.count * (index + 1) / chunkCount
            var chunk: [String] = []
            chunk.reserveCapacity(Self.chunkCapacity)
            chunk.append(contentsOf: sorted[start..<end])
            chunks.append(chunk)
            start = end
        }
    }

    var isEmpty: Bool { count == 0 }

    /// Whether every id is less than the next (as Swift `String`s compare).
    static func isStrictlyIncreasing(_ ids: [String]) -> Bool {
        var index = 1
        while index < ids.count {
            guard ids[index - 1] < ids[index] else { return false }
            index += 1
        }
        return true
    }

    /// Adds `id`; returns false (changing nothing) when it is already there.
    @discardableResult
    mutating func insert(_ id: String) -> Bool {
        guard !chunks.isEmpty else {
            var chunk: [String] = []
            chunk.reserveCapacity(Self.chunkCapacity)
            chunk.append(id)
            chunks.append(chunk)
            count = 1
            return true
        }
        // The first chunk whose last id is not less than `id`, or else the last chunk.
        var chunkIndex = min(firstChunk(endingAtOrAfter: id), chunks.count - 1)
        var position = Self.firstIndex(in: chunks[chunkIndex], notLessThan: id)
        if position < chunks[chunkIndex].count, chunks[chunkIndex][position] == id { return false }
        if chunks[chunkIndex].count == Self.chunkCapacity {
            // Split before inserting, so that no chunk ever grows past the capacity it reserved.
            let half = split(chunkIndex)
            if position > half {
                chunkIndex += 1
                position -= half
            }
        }
        chunks[chunkIndex].insert(id, at: position)
        count += 1
        return true
    }

    /// Removes `id`; returns false when it was not there.
    @discardableResult
    mutating func remove(_ id: String) -> Bool {
        let chunkIndex = firstChunk(endingAtOrAfter: id)
        guard chunkIndex < chunks.count else { return false }
        let position = Self.firstIndex(in: chunks[chunkIndex], notLessThan: id)
        guard position < chunks[chunkIndex].count, chunks[chunkIndex][position] == id else { return false }
        chunks[chunkIndex].remove(at: position)
        count -= 1
        if chunks[chunkIndex].count < Self.chunkMinimum { rebalance(chunkIndex) }
        return true
    }

    /// Whether `id` is there.
    func contains(_ id: String) -> Bool {
        let chunkIndex = firstChunk(endingAtOrAfter: id)
        guard chunkIndex < chunks.count else { return false }
        let position = Self.firstIndex(in: chunks[chunkIndex], notLessThan: id)
        return position < chunks[chunkIndex].count && chunks[chunkIndex][position] == id
    }

    /// The ids greater than `after` (all of them without it), in order, as a lazy sequence: finding
    /// the start costs O(log n), each id after that O(1).
    func ids(after: String?) -> Cursor {
        guard let after else { return Cursor(chunks: chunks, chunk: 0, index: 0) }
        let chunkIndex = firstChunk(endingAfter: after)
        guard chunkIndex < chunks.count else { return Cursor(chunks: chunks, chunk: chunks.count, index: 0) }
        let chunk = chunks[chunkIndex]
        var low = 0
        var high = chunk.count
        while low < high {
            let middle = (low + high) / 2
            if chunk[middle] <= after { low = middle + 1 } else { high = middle }
        }
        return Cursor(chunks: chunks, chunk: chunkIndex, index: low)
    }

    /// Every id, in order (O(n); for tests and diagnostics).
    var all: [String] { Array(ids(after: nil)) }

    /// Each chunk's size, in order (for tests of the structure's bounds).
    var chunkSizes: [Int] { chunks.map(\.count) }

    /// A position in the ids, walking forward. It holds the chunks as they were when it was made
    /// (copy on write), so it stays valid while the index changes.
    package struct Cursor: Sequence, IteratorProtocol {
        fileprivate let chunks: [[String]]
        fileprivate var chunk: Int
        fileprivate var index: Int

        /// Whether `next()` would return an id.
        package var hasNext: Bool { chunk < chunks.count }

        package mutating func next() -> String? {
            guard chunk < chunks.count else { return nil }
            let id = chunks[chunk][index]
            index += 1
            if index == chunks[chunk].count {
                chunk += 1
                index = 0
            }
            return id
        }
    }

    // MARK: - Searching

    /// Index of the first chunk whose last id is `id` or greater (`chunks.count` if none).
    private func firstChunk(endingAtOrAfter id: String) -> Int {
        var low = 0
        var high = chunks.count
        while low < high {
            let middle = (low + high) / 2
            if chunks[middle][chunks[middle].count - 1] < id { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// Index of the first chunk whose last id is greater than `id` (`chunks.count` if none).
    private func firstChunk(endingAfter id: String) -> Int {
        var low = 0
        var high = chunks.count
        while low < high {
            let middle = (low + high) / 2
            if chunks[middle][chunks[middle].count - 1] <= id { low = middle + 1 } else { high = middle }
        }
        return low
    }

    private static func firstIndex(in chunk: [String], notLessThan id: String) -> Int {
        var low = 0
        var high = chunk.count
        while low < high {
            let middle = (low + high) / 2
            if chunk[middle] < id { low = middle + 1 } else { high = middle }
        }
        return low
    }

    // MARK: - Splitting and merging

    /// Moves the upper half of a full chunk into a new chunk after it; returns how many ids stayed.
    @discardableResult
    private mutating func split(_ chunkIndex: Int) -> Int {
        let half = chunks[chunkIndex].count / 2
        var upper: [String] = []
        upper.reserveCapacity(Self.chunkCapacity)
        upper.append(contentsOf: chunks[chunkIndex][half...])
        chunks[chunkIndex].removeSubrange(half...)
        chunks.insert(upper, at: chunkIndex + 1)
        return half
    }

    /// After a removal left `chunkIndex` under `chunkMinimum`: drops it if empty; else merges it with
    /// a neighbour when both fit in one chunk, or evens the two out (each then holds at least half
    /// the capacity, and neither grows past it).
    private mutating func rebalance(_ chunkIndex: Int) {
        if chunks[chunkIndex].isEmpty {
            chunks.remove(at: chunkIndex)
            return
        }
        guard chunks.count > 1 else { return }
        let left = chunkIndex > 0 ? chunkIndex - 1 : chunkIndex
        let right = left + 1
        let total = chunks[left].count + chunks[right].count
        if total <= Self.chunkCapacity {
            let moved = chunks[right]
            chunks.remove(at: right)  // drops the array's reference, so `left`'s append needs no copy
            chunks[left].append(contentsOf: moved)
            return
        }
        let target = total / 2
        if chunks[left].count < target {
            let moving = target - chunks[left].count
            let moved = Array(chunks[right][..<moving])
            chunks[right].removeSubrange(..<moving)
            chunks[left].append(contentsOf: moved)
        } else {
            let moved = Array(chunks[left][target...])
            chunks[left].removeSubrange(target...)
            chunks[right].insert(contentsOf: moved, at: 0)
        }
    }
}
