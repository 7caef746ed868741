/// A log-linear histogram of nanosecond latencies, in the manner of HdrHistogram with 128 sub-buckets per
/// power of two: values below 128 are exact, larger ones are kept to within 1/128 (0.8 %) of their value.
/// Recording is an index computation and an increment; percentiles walk the 7,424 counters once.
struct LatencyHistogram {
    private static let subBucketBits = 7
    private static let subBuckets = 1 << subBucketBits
    private var counts = [UInt64](repeating: 0, count: subBuckets + (64 - subBucketBits) * subBuckets)
    private(set) var count: UInt64 = 0
    private(set) var maximum: UInt64 = 0

    mutating func record(_ value: UInt64) {
        counts[LatencyHistogram.index(value)] += 1
        count += 1
        if value > maximum { maximum = value }
    }

    /// The smallest recorded value such that `percent` % of the recorded values are at most it, reported as
    /// the top of its bucket (HdrHistogram's "highest equivalent value"), never above the maximum.
    func percentile(_ percent: Double) -> UInt64 {
        guard count > 0 else { return 0 }
        let rank = max(1, UInt64((percent / 100 * Double(count)).rounded(.up)))
        var seen: UInt64 = 0
        for (index, bucketCount) in counts.enumerated() where bucketCount > 0 {
            seen += bucketCount
            if seen >= rank { return min(LatencyHistogram.highestValue(index), maximum) }
        }
        return maximum
    }

    /// Bucket of `value`: values below 128 index themselves; otherwise the position of the highest set bit
    /// picks a power of two and the next 7 bits a sub-bucket within it.
    @inline(__always)
    private static func index(_ value: UInt64) -> Int {
        guard value >= UInt64(subBuckets) else { return Int(value) }
        let highestBit = 63 - value.leadingZeroBitCount
        let shift = highestBit - subBucketBits
        return subBuckets + shift * subBuckets + Int(value >> UInt64(shift)) - subBuckets
    }

    private static func highestValue(_ index: Int) -> UInt64 {
        guard index >= subBuckets else { return UInt64(index) }
        let shift = (index - subBuckets) / subBuckets
        let mantissa = UInt64((index - subBuckets) % subBuckets + subBuckets)
        return ((mantissa + 1) << UInt64(shift)) - 1
    }
}

/// Checks one subscriber's deliveries against "every published sequence number, once each, in order".
///
/// - lost: published but never delivered (counted at the end: published minus distinct deliveries);
/// - reordered: delivered after a higher sequence number (it had been a gap);
/// - duplicate: delivered again.
///
/// Only the gaps are remembered, so a correct stream costs two integers.
struct SequenceChecker {
    /// One past the highest sequence number delivered.
    private(set) var next: UInt64 = 0
    /// Distinct sequence numbers delivered.
    private(set) var distinct: UInt64 = 0
    private(set) var reordered: UInt64 = 0
    private(set) var duplicates: UInt64 = 0
    /// Sequence numbers below `next` not delivered (yet).
    private var gaps: Set<UInt64> = []

    mutating func record(_ sequence: UInt64) {
        if sequence == next {
            next += 1
            distinct += 1
        } else if sequence > next {
            for missing in next..<sequence { gaps.insert(missing) }
            next = sequence + 1
            distinct += 1
        } else if gaps.remove(sequence) != nil {
            reordered += 1
            distinct += 1
        } else {
            duplicates += 1
        }
    }

    /// Published sequence numbers (0..<published) never delivered.
    func lost(published: UInt64) -> UInt64 {
        published > distinct ? published - distinct : 0
    }
}

/// Checks deliveries when each publication goes to exactly one subscriber (the spread workload): a
/// bitmap over sequence numbers finds duplicates, a per-connection high-water mark finds reordering.
struct SpreadChecker {
    private var seen: [UInt64] = []
    private var highest: [UInt64]
    private(set) var distinct: UInt64 = 0
    private(set) var reordered: UInt64 = 0
    private(set) var duplicates: UInt64 = 0

    init(subscribers: Int) {
        highest = [UInt64](repeating: 0, count: subscribers)
    }

    /// Records `sequence` (numbered from 1) delivered to subscriber `subscriber`.
    mutating func record(_ sequence: UInt64, subscriber: Int) {
        let word = Int(sequence >> 6)
        if word >= seen.count { seen += [UInt64](repeating: 0, count: max(word + 1 - seen.count, seen.count)) }
        let bit = UInt64(1) << (sequence & 63)
        if seen[word] & bit != 0 {
            duplicates += 1
            return
        }
        seen[word] |= bit
        distinct += 1
        if sequence < highest[subscriber] { reordered += 1 } else { highest[subscriber] = sequence }
    }

    func lost(published: UInt64) -> UInt64 {
        published > distinct ? published - distinct : 0
    }
}

/// Lost, reordered and duplicate deliveries, plus other signs that a run went wrong (error replies,
/// unreadable frames, connections the server closed). All must be zero.
struct Integrity: Equatable {
    var lost: UInt64 = 0
    var reordered: UInt64 = 0
    var duplicates: UInt64 = 0
    var errors = 0

    var isClean: Bool { self == Integrity() }

    /// `lost/reordered/duplicate` (and `, N errors` when there were any).
    var summary: String {
        "\(lost)/\(reordered)/\(duplicates)" + (errors > 0 ? ", \(errors) errors" : "")
    }
}

/// A benchmark result that can say whether its run was clean and summarise itself in one line.
protocol Measured {
    var integrity: Integrity { get }
    /// One line for the progress output, printed as the run ends.
    var summaryLine: String { get }
}

extension FanOutResult: Measured {
    var summaryLine: String { fixedRate ? Report.latencyLine(self) : Report.line(self) }
}

extension ScaleResult: Measured {
    var summaryLine: String { Report.scaleLine(self) }
}

extension SpreadResult: Measured {
    var summaryLine: String { Report.spreadLine(self) }
}
