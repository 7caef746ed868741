import KVOEngine
import KVOModel

/// The sequence number, revision and size of every history row on disk, oldest first, with their running
/// byte total: what `SQLiteStore` needs to trim history to its limits without asking the database.
///
/// Rows are keyed by `seq` (the table's primary key), given in order by `nextSequence()`: a batch's rows
/// share one revision, and trimming drops a revision's rows together. 24 bytes per row (2.4 MB for the
/// default 100,000 rows). Owned by one `SQLiteStore`; the same
/// thread rule (the loop thread only).
struct HistoryLedger {
    private var revisions: [UInt64] = []
    private var sequences: [Int64] = []
    private var sizes: [Int] = []
    /// The highest `seq` given or loaded (rows are never renumbered).
    private(set) var lastSequence: Int64 = 0
    /// Index of the oldest live row (rows before it were dropped; compacted now and then).
    private var head = 0
    /// Sum of `bytes` over the live rows.
    private(set) var totalBytes = 0

    /// Live rows.
    var count: Int { revisions.count - head }

    /// Records a row appended to (or loaded from) the table with key `sequence`.
    mutating func append(sequence: Int64, revision: UInt64, bytes: Int) {
        revisions.append(revision)
        sequences.append(sequence)
        sizes.append(bytes)
        totalBytes += bytes
        lastSequence = max(lastSequence, sequence)
    }

    /// The revision of the newest row (nil: none).
    var newestRevision: UInt64? { count > 0 ? revisions.last : nil }

    /// The key of the next row appended.
    func nextSequence() -> Int64 { lastSequence + 1 }

    /// Forgets the `n` newest rows (a rolled-back append).
    mutating func removeLast(_ n: Int) {
        precondition(n <= count, "removing more history rows than the ledger holds")
        for _ in 0..<n {
            totalBytes -= sizes.removeLast()
            revisions.removeLast()
            sequences.removeLast()
        }
    }

    /// How many of the oldest rows must go so that at most `limit` rows and at most `byteLimit` bytes
    /// remain. Like the engine's in-memory history, the byte cap never drops the newest row: one row
    /// larger than the cap is kept alone (the count limit still applies, so `limit` 0 keeps nothing).
    func rowsToDrop(limit: Int, byteLimit: Int) -> Int {
        var drop = max(count - max(limit, 0), 0)
        guard drop < count else { return count }
        var bytes = totalBytes
        for index in head..<(head + drop) { bytes -= sizes[index] }
        while bytes > byteLimit, count - drop > 1 {
            bytes -= sizes[head + drop]
            drop += 1
        }
        // A revision's rows (a batch's) go together: a replay from before it must not see half of it.
        while drop > 0, drop < count, revisions[head + drop] == revisions[head + drop - 1] { drop += 1 }
        return drop
    }

    /// The revision of the `offset`-th oldest live row (0 is the oldest).
    func revision(at offset: Int) -> UInt64 {
        revisions[head + offset]
    }

    /// The key of the `offset`-th oldest live row.
    func sequence(at offset: Int) -> Int64 {
        sequences[head + offset]
    }

    /// Forgets the `n` oldest rows (deleted from the table).
    mutating func removeFirst(_ n: Int) {
        precondition(n <= count, "dropping more history rows than the ledger holds")
        for index in head..<(head + n) { totalBytes -= sizes[index] }
        head += n
        if head > 4096, head * 2 > revisions.count {
            revisions.removeFirst(head)
            sequences.removeFirst(head)
            sizes.removeFirst(head)
            head = 0
        }
    }
}
