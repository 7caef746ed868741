import KVOEngine

/// Inserts the objects `SQLiteStore.load` reads into an `ObjectTable` on a thread of its own, so that
/// the insertions (most of a large load: random stores into the table's bucket array, which miss the
/// caches and fault in its pages) overlap the reading of the rows (SQLite's stepping,
/// `CanonicalObjectScan`, copying each text into its `PackedObject`) instead of following each row.
///
/// The reader `add`s each row in order; rows go to the inserting thread in batches of `batchSize`, at
/// most `maximumQueuedBatches` queued at once (so the rows in flight stay a few hundred kilobytes however
/// far the reader gets ahead). The inserting thread applies them in the order they were added, exactly as
/// `ObjectTable.setPacked` one after another would: a later row for the same id replaces the earlier one,
/// and `finish` returns the table with the ids that were new to it, in the order they were first added.
///
/// Ownership and threads: made, fed (`add`) and finished (`finish`) by one thread, the loader's. The table
/// and the id list are the inserting thread's own until it ends (it hands them over in `filled`, which
/// `finish` reads after joining it). The queue between them is guarded by `lock`. A system that refuses
/// the thread stops kvod (`WorkerThread.start`), as for the cluster's threads. `finish` must be called once, also
/// when the load fails part way (it then ends the thread; the caller drops what it returns): until then
/// the inserting thread waits for rows, holding the filler.
/// `@unchecked Sendable` for that hand-over alone.
final class ObjectTableFiller: @unchecked Sendable {
    /// Rows per batch handed to the inserting thread.
    static let batchSize = 4_096
    /// Most batches queued for the inserting thread; `add` waits while this many are.
    static let maximumQueuedBatches = 4

    typealias Row = (id: String, packed: PackedObject)

    /// Up to `batchSize` rows in memory of their own: initialized by the loader, moved out and deallocated
    /// by the inserting thread.
    private struct Batch {
        let rows = UnsafeMutablePointer<Row>.allocate(capacity: ObjectTableFiller.batchSize)
        var count = 0
    }

    private let lock = ConditionLock()
    /// Batches added and not yet taken by the inserting thread, oldest first. Under `lock`.
    private var queued: [Batch] = []
    /// Set by `finish` once the last batch is queued. Under `lock`.
    private var noMoreRows = false
    /// The batch being filled. Loader thread.
    private var filling = Batch()
    /// How many rows the loader expects to add.
    private let expectedRows: Int
    /// The filled table and the ids new to it in the order added: set by the inserting thread as it ends,
    /// read by `finish` after joining it.
    private var filled: (table: ObjectTable, newIDs: [String])?
    private var thread = WorkerThread()
    private var finished = false

    /// Starts the inserting thread on a new table with room for `expectedRows` objects (how many rows the
    /// loader will add, if it knows; more may be added).
    init(expectedRows: Int) {
        self.expectedRows = expectedRows
        thread.start("the object loader's inserting thread") { [self] in insertUntilFinished() }
    }

    /// Queues object `id` with `packed` as its value, to be stored after every row added before it.
    /// Loader thread.
    func add(_ id: String, _ packed: PackedObject) {
        (filling.rows + filling.count).initialize(to: (id, packed))
        filling.count += 1
        if filling.count == ObjectTableFiller.batchSize { queueFillingBatch() }
    }

    /// Queues the last rows, waits until the inserting thread has stored every row and ended, and returns
    /// the table and the ids that were new to it, in the order they were added. Loader thread; once.
    func finish() -> (table: ObjectTable, newIDs: [String]) {
        precondition(!finished, "ObjectTableFiller.finish() was called twice")
        let last = filling
        lock.signal {
            queued.append(last)
            noMoreRows = true
        }
        thread.join()
        finished = true
        guard let result = filled else { preconditionFailure("the inserting thread ended without its table") }
        filled = nil
        return result
    }

    // MARK: - Private

    /// Hands `filling` to the inserting thread (waiting while the queue is full) and starts a new batch.
    private func queueFillingBatch() {
        let batch = filling
        filling = Batch()
        lock.wait(until: { queued.count < ObjectTableFiller.maximumQueuedBatches }) { () }
        lock.signal { queued.append(batch) }
    }

    /// The inserting thread: stores each queued batch in order until `finish` says no more rows come. The
    /// table and the id list are local variables while they fill, handed to `filled` at the end.
    private func insertUntilFinished() {
        var table = ObjectTable()
        table.reserveCapacity(expectedRows)
        var newIDs: [String] = []
        newIDs.reserveCapacity(expectedRows)
        while true {
            let (batches, isLast) = lock.wait(until: { !queued.isEmpty || noMoreRows }) { () -> ([Batch], Bool) in
                let taken = queued
                queued = []
                return (taken, noMoreRows)
            }
            // Wake the loader if it waits for room in the queue.
            lock.signal {}
            for batch in batches {
                for index in 0..<batch.count {
                    let (id, packed) = (batch.rows + index).move()
                    if table.setPacked(id, packed) { newIDs.append(id) }
                }
                batch.rows.deallocate()
            }
            if isLast { break }
        }
        filled = (table, newIDs)
    }
}
