import CLibUV
import KVOEngine
import KVOJSON
import KVOModel

/// The write path: the one door every write passes on its way to the engine (`applyWrite`), and the writes the
/// server makes on its own (`serverWrite`: an object's expiry, an ended session's actions and ephemeral
/// deletions). Loop thread only, like the rest of `Server`.
extension Server {
    /// The one door to the engine for writes (docs/design.md, "The write path"): a live request on a single node
    /// (`handleLine`), each operation of a replicated entry on every cluster node (`applyClusterEntry`), a session's
    /// action and the server's own writes (`serverWrite`). A batch's parts pass inside their batch, a
    /// write's modifiers inside the write (`RequestHandler`, which admits it by its row first). So what a write is
    /// (its time, its rights, its modifiers, its session, its events) is decided here once, whatever path it took.
    ///
    /// Sets the engine's write time to `time` (the request's, or the replicated entry's: every node applies a
    /// write at its publisher's time), carries out `request` as `connection` with the rights of `access`, bounds a
    /// reply that could be large by `budget`, ties an ephemeral object it created to `ephemeralSession`, and
    /// delivers the events. Returns
    /// the reply; the caller answers (or not) and counts it.
    func applyWrite(_ request: Request, from connection: ConnectionID, access: ConnectionAccess,
                    budget: ReplyBudget = .unlimited, time: Int64,
                    ephemeralSession: String? = nil) -> Result<ReplyFields, KVOError> {
        handler.engine.writeTime = time
        notifications.removeAll(keepingCapacity: true)
        let outcome = handler.handle(request, from: connection, access: access, budget: budget,
                                     notifications: &notifications)
        if let ephemeralSession, case .success = outcome.reply, request.isEphemeralWrite,
           let object = request.writtenObject {
            registerEphemeral(object, session: ephemeralSession)
        }
        deliverNotifications()
        deliverBindingEvents()
        return outcome.reply
    }

    /// Whether the server may make its own writes now: not while the store refuses writes or the stream is
    /// unavailable (expiries and ending sessions wait, and are due again once writes are taken).
    var takesServerWrites: Bool { storage.refusal == nil && cluster?.refusal == nil }

    /// Makes the write `line` (a request object without `id`) as `user` (`serverUser`: the server itself). A
    /// single node decodes it and applies it now (`applyWrite`), at the loop's time, with the user's rights as they
    /// are now (`clusterAccess(forUser:)`), and returns its reply. A cluster node submits it to the stream like a
    /// client's write, with a writer of no connection: nobody is answered, every node applies it at the same
    /// position with the user's rights there, and it leaves the queue at the write deadline like any write, so an
    /// unreachable stream piles nothing up; it returns nil. A `retained` write (an ended session's) is the exception:
    /// it has no deadline and waits for the stream however long (`ClusterReplicator.Writer.retained`), with
    /// Counted in `kvod_requests_total` under its operation
    /// either way (in cluster mode when applied).
    @discardableResult
    func serverWrite(_ line: [UInt8], as user: String?, retained: Bool = false,
                     ) -> Result<ReplyFields, KVOError>? {
        let decoded = RequestDecoder.decode(line).request
        if let cluster {
            let operation = (try? decoded.get()).map { MetricsOperation($0) } ?? .invalid
            let deadline = retained ? UInt64.max : clock.milliseconds &+ UInt64(cluster.configuration.writeTimeout * 1000)
            cluster.submit(line: line, user: user,
                           writer: ClusterReplicator.Writer(connection: Server.clusterConnection, requestID: nil,
                                                            operation: operation, deadline: deadline, started: 0,
                                                            retained: retained))
            return nil
        }
        let request: Request
        switch decoded {
        case let .success(value): request = value
        case let .failure(error):
            metrics.countRequest(.invalid, error: error.code)
            return .failure(error)
        }
        let reply = applyWrite(request, from: Server.clusterConnection, access: clusterAccess(forUser: user),
                               time: clock.wallMilliseconds)
        switch reply {
        case .success: metrics.countRequest(MetricsOperation(request), error: nil)
        case let .failure(error): metrics.countRequest(MetricsOperation(request), error: error.code)
        }
        return reply
    }
}
