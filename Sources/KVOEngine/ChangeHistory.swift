import KVOJSON

/// The most recent accepted writes, as deltas, bounded by count and by (estimated) bytes, for
/// `observe` with `sinceRev`.
///
/// One array of entries, so that a restore adopts the loader's array as it is (`append(contentsOf:)`: no
/// copy). An entry's size is 64 bytes, its object id and its `changeSize`, however it holds its change.
///
/// Owned by `KVOEngine`; loop thread only.
final class ChangeHistory {
    let limit: Int
    let byteLimit: Int
    private var records: [HistoryEntry] = []
    /// Index of the oldest live entry in `records` (entries before it are dropped lazily).
    private var head = 0
    private(set) var bytes = 0

    init(limit: Int, byteLimit: Int) {
        self.limit = max(limit, 0)
        self.byteLimit = max(byteLimit, 0)
    }

    /// Entries kept.
    var count: Int { records.count - head }

    /// The revision of the oldest entry kept (nil when empty).
    var oldestRevision: UInt64? { head < records.count ? records[head].rev : nil }

    /// What the byte limit counts for `record`.
    private static func size(of record: HistoryEntry) -> Int {
        64 + record.object.utf8.count + record.changeSize
    }

    /// Records one write; drops the oldest entries past the limits.
    func append(_ record: consuming HistoryEntry) {
        guard limit > 0 else { return }
        bytes += ChangeHistory.size(of: record)
        records.append(record)
        dropPastLimits()
    }

    /// Records `restored` (oldest first, after every entry kept) as appending each would, dropping the same
    /// oldest entries; into an empty history the array itself is adopted, not copied.
    func append(contentsOf restored: [HistoryEntry]) {
        guard limit > 0, !restored.isEmpty else { return }
        if records.isEmpty {
            records = restored
        } else {
            records.append(contentsOf: restored)
        }
        for record in restored { bytes += ChangeHistory.size(of: record) }
        // Each append keeps the longest run of newest entries within the limits; so does one pass at the end.
        dropPastLimits()
    }

    @inline(__always)
    private func dropPastLimits() {
        guard count > limit || (bytes > byteLimit && count > 1) else { return }
        while count > limit || (bytes > byteLimit && count > 1) {
            bytes -= ChangeHistory.size(of: records[head])
            head += 1
        }
        // A batch's entries share one revision: history keeps all of them or none (a replay from before
        // it must not see half of it).
        let dropped = records[head - 1].rev
        while head < records.count, records[head].rev == dropped {
            bytes -= ChangeHistory.size(of: records[head])
            head += 1
        }
        if head > 4096 && head * 2 > records.count {
            records.removeFirst(head)
            head = 0
        }
    }

    /// The entries after `revision`, oldest first, when history still reaches back that far (every
    /// write after `revision` up to `current` is kept); nil otherwise.
    ///
    /// A revision has one entry or, for a batch, several (kept or dropped together): the first entry after
    /// `revision` is found by a binary search.
    func entries(after revision: UInt64, current: UInt64) -> ArraySlice<HistoryEntry>? {
        guard revision <= current else { return nil }
        if revision == current { return records[records.count...] }
        guard let oldest = oldestRevision, oldest <= revision + 1 else { return nil }
        var low = head
        var high = records.count
        while low < high {
            let middle = low + (high - low) / 2
            if records[middle].rev <= revision { low = middle + 1 } else { high = middle }
        }
        return records[low...]
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

    /// `estimatedSize` of the object whose `JSONWriter` text is `text`, from the text alone (no value built);
    /// nil when `CanonicalObjectScan` does not prove the text canonical. In such text a string's bytes are
    /// its UTF-8 (no escapes) and its estimate is its text; `false` is 5 bytes either way; `null` and `true`
    /// are estimated one byte over their text and an integer 12 bytes; and an object or array with n ≥ 1
    /// members estimates n separators where its text has n − 1 commas (one byte more), an empty one none.
    static func estimatedSize(ofCanonicalObject text: UnsafeBufferPointer<UInt8>) -> Int? {
        guard let counts = CanonicalObjectScan.scanObject(text) else { return nil }
        return text.count + counts.nonEmptyContainers + counts.nullsAndTrues + 12 * counts.integers - counts.integerBytes
    }
}
