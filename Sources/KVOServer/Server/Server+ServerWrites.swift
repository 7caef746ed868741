import CLibUV
import KVOEngine
import KVOJSON
import KVOModel

/// Writes the server makes on its own (an object's expiry, an ended session's actions and ephemeral deletions):
/// one way for all of them, through the same door as a client's write. Loop thread only, like the rest of `Server`.
extension Server {
    /// Whether the server may make its own writes now: not while the store refuses writes or the stream is
    /// unavailable (expiries and ending sessions wait, and are due again once writes are taken).
    var takesServerWrites: Bool { storage.refusal == nil && cluster?.refusal == nil }

    /// Makes the write `line` (a request object without `id`) as `user` (`serverUser`: the server itself). A
    /// single node decodes and applies it now, at the loop's time, with the user's rights as they are now
    /// (`clusterAccess(forUser:)`), delivers its events and returns its reply. A cluster node submits it to the
    /// stream like a client's write, with a writer of no connection: nobody is answered, every node applies it
    /// at the same position with the user's rights there, and it leaves the queue at the write deadline like any
    /// write, so an unreachable stream piles nothing up; it returns nil. Counted in `kvod_requests_total` under
    /// its operation either way (in cluster mode when applied).
    @discardableResult
    func serverWrite(_ line: [UInt8], as user: String?) -> Result<ReplyFields, KVOError>? {
        let decoded = RequestDecoder.decode(line).request
        if let cluster {
            let operation = (try? decoded.get()).map { MetricsOperation($0) } ?? .invalid
            let deadline = clock.milliseconds &+ UInt64(cluster.configuration.writeTimeout * 1000)
            cluster.submit(line: line, user: user,
                           writer: ClusterReplicator.Writer(connection: Server.clusterConnection, requestID: nil,
                                                            operation: operation, deadline: deadline, started: 0))
            return nil
        }
        let request: Request
        switch decoded {
        case let .success(value): request = value
        case let .failure(error):
            metrics.countRequest(.invalid, error: error.code)
            return .failure(error)
        }
        handler.engine.writeTime = clock.wallMilliseconds
        notifications.removeAll(keepingCapacity: true)
        let outcome = handler.handle(request, from: Server.clusterConnection, access: clusterAccess(forUser: user),
                                     budget: .unlimited, eventEncoding: .full, notifications: &notifications)
        deliverNotifications()
        deliverBindingEvents()
        switch outcome.reply {
        case .success: metrics.countRequest(MetricsOperation(request), error: nil)
        case let .failure(error): metrics.countRequest(MetricsOperation(request), error: error.code)
        }
        return outcome.reply
    }
}
