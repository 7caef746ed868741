import KVOJSON

/// The most recent accepted writes, bounded by count and by (estimated) bytes, for `observe` with
/// `sinceRev`.
///
/// Each entry also keeps the written object's value *before* the write when it is known (always for
/// writes made since startup; for history restored from disk, from the previous entry of the same
/// object), so a replay can roll the store back to any retained revision without copying it. The
/// values are shared copy-on-write with the live store, so an entry costs roughly the part of the
/// object its write changed. Owned by `KVOEngine`; loop thread only.
final class ChangeHistory {
    /// What a replay needs about one write.
    struct Entry {
        let record: HistoryEntry
        /// The object's value before the write: `.some(nil)` when it did not exist, nil when unknown.
        let previous: JSONValue??
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

    /// Restores history loaded from disk (oldest first). The value before each write is known from
    /// the previous entry of the same object; before the first one it is unknown.
    func restore(_ records: [HistoryEntry]) {
        var last: [String: JSONValue?] = [:]
        for record in records {
            append(record, previous: last[record.object])
            last[record.object] = .some(record.value)
        }
    }

    /// Records one write; drops the oldest entries past the limits. `changedBytes` estimates the
    /// size of what the write changed (the whole object when not given).
    func append(_ record: HistoryEntry, previous: JSONValue??, changedBytes: Int? = nil) {
        guard limit > 0 else { return }
        let size = 64 + record.object.utf8.count + (changedBytes ?? ChangeHistory.estimatedBytes(of: record))
        entries.append(Entry(record: record, previous: previous, bytes: size))
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

    /// Size estimate for a restored entry: its whole recorded value.
    private static func estimatedBytes(of record: HistoryEntry) -> Int {
        if let change = record.arrayChange {
            return (change.old + change.new).reduce(0) { $0 + $1.estimatedSize }
        }
        return record.value?.estimatedSize ?? 0
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
