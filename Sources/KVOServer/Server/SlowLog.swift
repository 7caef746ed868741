import KVOJSON

/// The slow-request log (Redis's SLOWLOG, docs/protocol.md, "Slow requests and stalls"): the last requests whose
/// handling took the loop at least `--slow-request`, and the last loop iterations that worked that long (stalls),
/// each with what ran in it; shown by the `slow` operation (the counts since the start are `ServerMetrics`':
/// `kvod_slow_requests_total`, `kvod_loop_stalls_total`).
///
/// *Cost.* Nothing is read for it that the request's duration metric does not read already: a request's handling
/// reads the clock when it begins and when its reply is queued (`Server.handleLine`, `Server.requestAnswered`); the
/// answer's time is stored here (`answeredAt`) and compared once with the threshold when the line's handling ends.
/// Only a slow request is looked at again (its line parsed a second time for its operation, object and key path;
/// never a value). A loop iteration's work is measured once at its end (`Server.iterationEnded`); what ran in it is
/// counted as it runs (`activity`: one addition per request, per group commit, per housekeeping tick).
///
/// Owned by `Server`; loop thread only.
struct SlowLog {
    /// How many requests and stalls are kept (each): the oldest go first.
    static let capacity = 128

    /// A request that took the loop at least the threshold.
    struct Request {
        /// Its operation (`invalid` for a line that did not decode), object (or pattern) and key path, when it
        /// named them; never a value.
        var operation: String
        var object: String?
        var keyPath: String?
        var nanoseconds: UInt64
        var connection: UInt64
        var user: String?
        /// When it was answered (ms since 1970, the server's wall clock).
        var at: Int64
    }

    /// What a loop iteration did, counted as it runs.
    struct Activity {
        /// Requests answered.
        var requests = 0
        /// Group commits and their time.
        var commits = 0
        var commitNanoseconds: UInt64 = 0
        /// Whether the housekeeping tick ran (expiries, ended sessions, deadlines, the store's check).
        var housekeeping = false
        /// Cluster stream entries applied.
        var clusterEntries = 0
    }

    /// A loop iteration that worked at least the threshold, and what ran in it.
    struct Stall {
        var nanoseconds: UInt64
        var activity: Activity
        /// Events queued for subscribers (fan-out).
        var events: UInt64
        /// When it ended (ms since 1970).
        var at: Int64
    }

    /// `--slow-request`, in nanoseconds (live: SIGHUP).
    var thresholdNanoseconds: UInt64
    /// When the last request was answered (`ServerClock.nanoseconds`); 0 once a line's handling begins, so a
    /// request answered later (a password check, a cluster write, an `atLeastRev` wait) is not taken for it.
    var answeredAt: UInt64 = 0
    /// What the current loop iteration has done so far.
    var activity = Activity()
    /// `ServerMetrics.eventsSent` when the current iteration began.
    var eventsMark: UInt64 = 0
    private(set) var requests = BoundedRing<Request>(capacity: SlowLog.capacity)
    private(set) var stalls = BoundedRing<Stall>(capacity: SlowLog.capacity)

    init(thresholdNanoseconds: UInt64) {
        self.thresholdNanoseconds = thresholdNanoseconds
    }

    /// Whether a line whose handling began at `begun` was answered within it at least the threshold later.
    /// One comparison: `answeredAt` is 0 (never) or a time after `begun`, which is never 0, and the threshold is at
    /// most about 31 years (`ServerConfiguration.slowRequestNanoseconds`), so the sum cannot overflow.
    @inline(__always)
    func answerWasSlow(begun: UInt64) -> Bool {
        answeredAt >= begun &+ thresholdNanoseconds
    }

    mutating func record(_ request: Request) {
        requests.append(request)
    }

    mutating func record(_ stall: Stall) {
        stalls.append(stall)
    }

    /// Empties both lists (`slow` with `reset`); the metrics' counts stay.
    mutating func reset() {
        requests.removeAll()
        stalls.removeAll()
    }

    /// `slow`'s reply: the threshold, then both lists, newest first.
    func replyFields() -> [(String, JSONValue)] {
        [
            ("thresholdMicros", .int(Int64(thresholdNanoseconds / 1000))),
            ("requests", .array(requests.newestFirst.map(SlowLog.json))),
            ("stalls", .array(stalls.newestFirst.map(SlowLog.json))),
        ]
    }

    private static func json(_ request: Request) -> JSONValue {
        var members: [String: JSONValue] = [
            "op": .string(request.operation), "micros": .int(Int64(request.nanoseconds / 1000)),
            "connection": .int(Int64(request.connection)), "at": .int(request.at),
            "user": request.user.map(JSONValue.string) ?? .null,
        ]
        if let object = request.object { members["object"] = .string(object) }
        if let keyPath = request.keyPath { members["keyPath"] = .string(keyPath) }
        return .object(members)
    }

    private static func json(_ stall: Stall) -> JSONValue {
        .object([
            "micros": .int(Int64(stall.nanoseconds / 1000)), "at": .int(stall.at),
            "requests": .int(Int64(stall.activity.requests)), "events": .int(Int64(stall.events)),
            "commits": .int(Int64(stall.activity.commits)),
            "commitMicros": .int(Int64(stall.activity.commitNanoseconds / 1000)),
            "housekeeping": .bool(stall.activity.housekeeping),
            "clusterEntries": .int(Int64(stall.activity.clusterEntries)),
        ])
    }
}
