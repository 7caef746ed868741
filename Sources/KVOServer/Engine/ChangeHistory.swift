import KVOJSON

/// The most recent accepted writes, as deltas, bounded by count and by (estimated) bytes, for
/// `observe` with `sinceRev`.
///
/// Owned by `KVOEngine`; loop thread only.
final class ChangeHistory {
    struct Entry {
        let record: HistoryEntry
        let bytes: Int
    }

    let limit: Int
    let byteLimit: Int
    private var entries: [Entry] = []
    /// Index of the oldest live entry in `entries` (entries before it are dropped lazily).
    private var head = 0
    private(set) var bytes = 0

    init(limit: Int, byteLimit: Int) {
        self.limit = max(limit, 0)
        self.byteLimit = max(byteLimit, 0)
    }

    /// Entries kept.
    var count: Int { entries.count - head }

    /// The revision of the oldest entry kept (nil when empty).
    var oldestRevision: UInt64? { head < entries.count ? entries[head].record.rev : nil }

    /// Records one write; drops the oldest entries past the limits. `changeSize`: the change's size when
    /// the caller measured it already (else `RecordedChange.estimatedSize` walks its values).
    /// Makes room for `count` more entries at once (a restore), so that appending them does not grow
    /// the storage step by step, leaving each smaller copy behind as free heap.
    func reserveCapacity(forAppending count: Int) {
        entries.reserveCapacity(entries.count + min(count, limit))
    }

    func append(_ record: consuming HistoryEntry, changeSize: Int? = nil) {
        guard limit > 0 else { return }
        let size = 64 + record.object.utf8.count + (changeSize ?? record.change.estimatedSize)
        entries.append(Entry(record: record, bytes: size))
        bytes += size
        while count > limit || (bytes > byteLimit && count > 1) {
            bytes -= entries[head].bytes
            head += 1
        }
        if head > 4096 && head * 2 > entries.count {
            entries.removeFirst(head)
            head = 0
        }
    }

    /// The entries after `revision`, oldest first, when history still reaches back that far (every
    /// write after `revision` up to `current` is kept); nil otherwise.
    func entries(after revision: UInt64, current: UInt64) -> ArraySlice<Entry>? {
        guard revision <= current else { return nil }
        if revision == current { return entries[entries.count...] }
        guard let oldest = oldestRevision, oldest <= revision + 1 else { return nil }
        // Revisions are consecutive, so the position follows from the difference.
        let start = head + Int(revision + 1 - oldest)
        return entries[start...]
    }
}

extension JSONValue {
    /// Roughly the length of this value's JSON, without encoding it.
    var estimatedSize: Int {
        switch self {
        case .null, .bool: return 5
        case .int, .double: return 12
        case let .string(text): return text.utf8.count + 2
        case let .array(elements): return elements.reduce(2) { $0 + $1.estimatedSize + 1 }
        case let .object(members): return members.reduce(2) { $0 + $1.key.utf8.count + 4 + $1.value.estimatedSize }
        }
    }
}
