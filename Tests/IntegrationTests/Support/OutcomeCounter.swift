import Foundation

/// Reply codes counted from writer threads.
final class OutcomeCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var counts: [String: Int] = [:]

    func add(_ outcome: String) {
        lock.lock()
        counts[outcome, default: 0] += 1
        lock.unlock()
    }

    var all: [String: Int] {
        lock.lock()
        defer { lock.unlock() }
        return counts
    }
}
