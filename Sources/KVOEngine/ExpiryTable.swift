/// An object's time to live (docs/protocol.md, "Expiry"): its length and the moment it ends, both in
/// milliseconds, the deadline on the wall clock (ms since 1970) of the write that set or refreshed it.
public struct Expiry: Equatable, Sendable {
    /// The time to live, refreshed by every write of the object: `deadline` = write time + `ttl`.
    public var ttl: Int64
    public var deadline: Int64

    public init(ttl: Int64, deadline: Int64) {
        self.ttl = ttl
        self.deadline = deadline
    }
}

/// The expiries of the objects that have one, and when to look at them again.
///
/// `entries` is the state (replicated, stored, hashed by `digest`). The queue is a binary min-heap of
/// reminders `(at, object, deadline)` for the server's timer: a reminder is stale, and skipped, when the
/// object's deadline is no longer the one it was made for (refreshed, removed); a refresh pushes a new one
/// rather than searching the heap. `due(now:retry:limit:)` hands out the reminders whose time has come and
/// remembers them again `retry` later, so an expiry the cluster did not apply yet is asked for again. Only objects with
/// a ttl cost anything: a write of another object tests `isEmpty`. Owned by `KVOEngine`; loop thread only.
final class ExpiryTable {
    private(set) var entries: [String: Expiry] = [:]
    private var queue: [(at: Int64, object: String, deadline: Int64)] = []

    var isEmpty: Bool { entries.isEmpty }
    var count: Int { entries.count }
    /// The earliest reminder queued, stale ones included (`Int64.max` with none): no object is due before it, so
    /// the server's check before each request (`KVOEngine.expiryCheckAt`) is one comparison with this.
    private(set) var earliestReminder = Int64.max
    /// Reminders queued, stale ones included.
    var reminderCount: Int { queue.count }

    subscript(object: String) -> Expiry? { entries[object] }

    /// Sets (or replaces) `object`'s expiry.
    func set(_ object: String, _ expiry: Expiry) {
        entries[object] = expiry
        push((expiry.deadline, object, expiry.deadline))
    }

    /// Removes `object`'s expiry (its reminders become stale).
    @discardableResult
    func remove(_ object: String) -> Expiry? {
        entries.removeValue(forKey: object)
    }

    /// The earliest moment a reminder falls due, stale ones dropped first; nil when there is none.
    func nextReminder() -> Int64? {
        dropStale()
        return queue.first?.at
    }

    /// The objects whose deadline is at or before `now` (each once per call, at most `limit`, earliest first),
    /// their reminders moved `retry` milliseconds later.
    func due(now: Int64, retry: Int64, limit: Int) -> [String] {
        var result: [String] = []
        while result.count < limit {
            dropStale()
            guard let top = queue.first, top.at <= now else { break }
            popTop()
            result.append(top.object)
            push((now + retry, top.object, top.deadline))
        }
        return result
    }

    /// Drops the stale reminders (and any second live one of an object), keeping each object's earliest live
    /// reminder with its time: a reminder handed out by `due` keeps its retry time. (Rebuilding from `entries`, as
    /// this once did, put handed-out objects back at their deadline, so one `due` call could hand out an object
    /// twice and a cluster node could ask for it again before the retry.)
    private func rebuild() {
        queue.sort { $0.at < $1.at }  // a sorted array is a valid min-heap
        var kept = Set<String>()
        queue.removeAll { entries[$0.object]?.deadline != $0.deadline || !kept.insert($0.object).inserted }
        earliestReminder = queue.first?.at ?? .max
    }

    private func dropStale() {
        while let top = queue.first, entries[top.object]?.deadline != top.deadline { popTop() }
    }

    private func push(_ reminder: (at: Int64, object: String, deadline: Int64)) {
        // Refreshes and handed-out reminders leave stale ones deep in the heap: dropped when they outnumber the entries.
        if queue.count > 2 * entries.count + 64 { rebuild() }
        queue.append(reminder)
        earliestReminder = min(earliestReminder, reminder.at)
        var child = queue.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard queue[child].at < queue[parent].at else { break }
            queue.swapAt(child, parent)
            child = parent
        }
    }

    private func popTop() {
        defer { earliestReminder = queue.first?.at ?? .max }
        let last = queue.removeLast()
        guard !queue.isEmpty else { return }
        queue[0] = last
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < queue.count, queue[left].at < queue[smallest].at { smallest = left }
            if right < queue.count, queue[right].at < queue[smallest].at { smallest = right }
            guard smallest != parent else { return }
            queue.swapAt(parent, smallest)
            parent = smallest
        }
    }
}
