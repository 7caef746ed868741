import KVOEngine
import KVOModel

/// `kvod_request_duration_seconds{op}`: how long the server took to answer requests, one histogram per
/// operation (`MetricsOperation`: the protocol's operation names, `admin` for user administration,
/// `invalid` for what could not be decoded, so the label set is closed and small).
///
/// A duration runs from the moment the loop starts handling a request line (`Server.handleLine`, the one
/// door every transport's requests pass: TCP, TLS, Unix socket, WebSocket) to the moment its reply is queued
/// on the connection (`Server.send`). A request answered later carries its start with it: `auth` (the
/// password check on the thread pool), user administration (hashing), a cluster write (the stream's round
/// trip) and an `atLeastRev` read (the wait for the revision) are measured to their reply too. Not included:
/// the time the line waited in the socket or behind a paused connection, and, for a write with `--data`, the
/// group commit that its reply then waits for at the end of the loop iteration (`kvod_group_commit_seconds`).
///
/// A value owned by `ServerMetrics`; loop thread only. Observing is `MetricsHistogram.observe` on the
/// operation's histogram: no allocation, no floating point.
struct RequestDurations {
    /// 5 µs … 1 s: most requests take a few microseconds of the loop's time; a slow one (a large `list`, an
    /// aggregate over a big array), a password check or a cluster write, milliseconds; past 1 s only `+Inf`.
    static let boundsNanoseconds: [UInt64] = [
        5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
        1_000_000, 2_500_000, 5_000_000, 10_000_000, 25_000_000, 50_000_000,
        100_000_000, 250_000_000, 500_000_000, 1_000_000_000,
    ]

    /// One histogram per operation, indexed by `MetricsOperation.rawValue`.
    private var histograms = [MetricsHistogram](repeating: MetricsHistogram(boundsNanoseconds: RequestDurations.boundsNanoseconds),
                                                count: MetricsOperation.allCases.count)

    /// One request of `operation` answered `nanoseconds` after its handling began.
    @inline(__always)
    mutating func observe(_ operation: MetricsOperation, nanoseconds: UInt64) {
        histograms[operation.rawValue].observe(nanoseconds: nanoseconds)
    }

    /// The histogram of `operation` (tests).
    func histogram(_ operation: MetricsOperation) -> MetricsHistogram {
        histograms[operation.rawValue]
    }

    /// The family, with the operations answered at least once (as `kvod_requests_total`, series appear once
    /// counted).
    func render(into out: inout PrometheusExposition) {
        out.family("kvod_request_duration_seconds", type: .histogram,
                   help: "Time from the start of handling a request to its reply being queued, by operation (a durable write's reply then waits for the group commit).")
        for operation in MetricsOperation.allCases where histograms[operation.rawValue].count > 0 {
            out.histogram("kvod_request_duration_seconds", labels: [("op", operation.name)], histograms[operation.rawValue])
        }
    }
}
