import KVOJSON
import KVOModel

/// Giving the database's free pages back to the file system (docs/design.md, "Reclaiming space"): the `compact`
/// requests waiting for the compaction in progress and what it has done so far, and when the automatic incremental
/// vacuum steps in. Each step is `SQLiteStore.reclaimSpace` of a bounded number of pages on a housekeeping tick
/// (`Server+Compaction`), so the loop never stops for a whole vacuum.
///
/// Owned by `Server` (a value stored in it); loop thread only.
struct SpaceReclaimer {
    /// Pages a `compact` gives back per housekeeping tick (100 ms): 4 MiB of 4 KiB pages, a few milliseconds each.
    static let compactStepPages = 1024
    /// Pages the automatic vacuum gives back per second, once enough are free (`isWorthReclaiming`).
    static let automaticStepPages = 512
    /// The automatic vacuum starts at this many free pages (1 MiB of 4 KiB pages)…
    static let automaticMinimumFreePages = 256
    /// …when they are at least this fraction (1/n) of the file: a file with a little churn is left as it is.
    static let automaticFreeFraction = 8

    /// A `compact` request waiting for the compaction in progress to end; its connection's reading is paused.
    struct Waiter {
        let connection: ConnectionID
        let id: JSONValue?
        let startedAt: UInt64
    }

    /// The requests the compaction in progress answers when it ends; empty: no compaction in progress.
    private(set) var waiters: [Waiter] = []
    /// The bytes `--max-disk` counts (database and WAL on disk) when the compaction in progress began.
    private(set) var bytesBefore = 0
    /// Pages the compaction in progress has given back so far.
    var pagesReclaimed = 0

    var isCompacting: Bool { !waiters.isEmpty }

    /// A `compact` request: it joins the compaction in progress, or begins one at `bytesOnDisk`.
    mutating func add(_ waiter: Waiter, bytesOnDisk: Int) {
        if waiters.isEmpty {
            bytesBefore = bytesOnDisk
            pagesReclaimed = 0
        }
        waiters.append(waiter)
    }

    /// The requests to answer; the compaction is over.
    mutating func finish() -> [Waiter] {
        defer { waiters.removeAll() }
        return waiters
    }

    /// Whether the automatic vacuum takes a step for `pages`.
    static func isWorthReclaiming(_ pages: StorePages) -> Bool {
        pages.incremental && pages.freePages >= automaticMinimumFreePages
            && pages.freePages &* automaticFreeFraction >= pages.pages
    }
}
