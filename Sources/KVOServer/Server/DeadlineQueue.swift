import KVOModel
import KVOEngine

/// Connections' deadlines of one kind (`ConnectionDeadlines`: the first request, the login, the TLS handshake),
/// in the order they were set.
///
/// Every connection gets the same timeout, so deadlines arrive in the order they were set: a FIFO queue, checked
/// from the front by the housekeeping timer, costs O(1) per connection and nothing per request (a
/// connection that has since done what it had to is simply skipped when its deadline comes up). Loop thread only.
struct DeadlineQueue {
    private var entries: [(connection: ConnectionID, deadline: UInt64)] = []
    /// Index of the first entry not yet due.
    private var head = 0

    var isEmpty: Bool { head == entries.count }

    /// Records that `connection` must have done what it must by `deadline` (milliseconds, `ServerClock.milliseconds`).
    mutating func add(_ connection: ConnectionID, deadline: UInt64) {
        entries.append((connection, deadline))
    }

    /// Removes and returns the connections whose deadline is at or before `now`.
    mutating func takeDue(now: UInt64) -> ArraySlice<(connection: ConnectionID, deadline: UInt64)> {
        let start = head
        while head < entries.count, entries[head].deadline <= now { head += 1 }
        let due = entries[start..<head]
        if head > 1024, head * 2 > entries.count {
            // Forget the handled front once it is most of the array (amortised O(1) per entry).
            let remaining = Array(entries[head...])
            let taken = Array(due)
            entries = remaining
            head = 0
            return taken[...]
        }
        return due
    }
}
