import KVOJSON
import KVOModel
import KVOEngine

/// Cluster mode: reads and observes with an `atLeastRev` this node has not reached yet, held until it
/// applies that revision (`takeReady`) or answered `unavailable` at their deadline (`takeExpired`).
///
/// A held request's connection reads nothing more meanwhile (`ReadPause.revision`), so it holds at most
/// one request per connection and its replies stay in request order. Bookkeeping only: the server
/// carries the requests out and resumes the connections. Loop thread only.
struct RevisionWaits {
    /// A request waiting for the node to apply `revision`.
    struct Waiting {
        var revision: UInt64
        var connection: ConnectionID
        var requestID: JSONValue?
        var request: Request
        /// `uv_now` milliseconds after which it is answered `unavailable`.
        var deadline: UInt64
        /// `uv_hrtime()` when the loop began handling the request (`kvod_request_duration_seconds`); 0: unknown.
        var started: UInt64 = 0
    }

    private var waiting: [Waiting] = []

    var isEmpty: Bool { waiting.isEmpty }

    mutating func add(_ item: Waiting) {
        waiting.append(item)
    }

    /// The requests whose revision is at or below `revision`, in the order they arrived.
    mutating func takeReady(revision: UInt64) -> [Waiting] {
        take { $0.revision <= revision }
    }

    /// The requests past their deadline at `now` (`uv_now` ms), in the order they arrived.
    mutating func takeExpired(now: UInt64) -> [Waiting] {
        take { $0.deadline <= now }
    }

    private mutating func take(where isDue: (Waiting) -> Bool) -> [Waiting] {
        guard waiting.contains(where: isDue) else { return [] }
        let due = waiting.filter(isDue)
        waiting.removeAll(where: isDue)
        return due
    }
}
