import KVOJSON
import KVOModel

/// The slow-request log's (`SlowLog`) recording, the loop iteration's end, and the `slow` operation.
/// Loop thread only, like the rest of `Server`.
extension Server {
    /// Records the request on `line` from `connection`, answered `slowLog.answeredAt - begun` after its handling
    /// began (`handleLine`, once the line's handling ends). Rare by design (at least `--slow-request` of the loop's
    /// time), so it may parse the line a second time: its operation, object (or pattern) and key path, taken only
    /// from a line that decodes as a request (whose ids and key paths are within their limits); never a value.
    @inline(never)
    func recordSlowRequest(_ line: UnsafeBufferPointer<UInt8>, from connection: Connection, begun: UInt64) {
        var entry = SlowLog.Request(operation: MetricsOperation.invalid.name, object: nil, keyPath: nil,
                                    nanoseconds: slowLog.answeredAt &- begun, connection: connection.id.rawValue,
                                    user: connection.principal?.user, at: clock.wallMilliseconds)
        let decoded = connection.principal == nil ? RequestDecoder.decodeBeforeLogin(line) : RequestDecoder.decode(line)
        var operation = MetricsOperation.invalid
        if case let .success(request) = decoded.request {
            operation = MetricsOperation(request)
            entry.operation = request.operation.name
            if let members = (try? JSONParser.parse(line))?.objectValue {
                entry.object = (members["object"] ?? members["pattern"])?.stringValue
                entry.keyPath = members["keyPath"]?.stringValue
            }
        }
        slowLog.record(entry)
        metrics.slowRequest(operation)
    }

    /// The end of a loop iteration (the check phase, after the flush): its work time into
    /// `kvod_loop_iteration_seconds`, and into the slow-request log's stalls when it reached `--slow-request`, with
    /// what ran in it; then the next iteration's activity starts from nothing.
    func iterationEnded() {
        let worked = metrics.iterationEnded(now: clock.nanoseconds, idle: clock.idleNanoseconds)
        if let worked, worked >= slowLog.thresholdNanoseconds {
            slowLog.record(SlowLog.Stall(nanoseconds: worked, activity: slowLog.activity,
                                         events: metrics.eventsSent &- slowLog.eventsMark, at: clock.wallMilliseconds))
            metrics.loopStalled()
        }
        slowLog.activity = SlowLog.Activity()
        slowLog.eventsMark = metrics.eventsSent
    }

    /// `slow`: the log, newest first; with `reset`, emptied once the reply is made.
    func slowReply(reset: Bool, budget: ReplyBudget) throws(KVOError) -> [(String, JSONValue)] {
        let fields = slowLog.replyFields()
        try RequestHandler.requireFit(.object(Dictionary(uniqueKeysWithValues: fields)), budget, "the slow-request log")
        if reset { slowLog.reset() }
        return fields
    }
}
