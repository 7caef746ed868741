import KVOEngine
import KVOJSON
import KVOModel

/// Signals (docs/protocol.md, "Signals"): a connection's `signal` bounded by its rate, carried out by the engine
/// like any request it answers (its row admitted, `write` checked by the engine, the payload delivered to this node's
/// observers through the one fan-out, encoded once), then, in cluster mode, relayed to the other nodes' observers over
/// NATS core; and the other nodes' signals delivered here. Loop thread only, like the rest of `Server`.
extension Server {
    /// A `signal` from `connection`: refused with `rate_limited` past the connection's rate (nothing sent), else
    /// performed and answered; in cluster mode, once this node's observers have it, queued for the others.
    func sendSignal(_ request: Request, id: JSONValue?, connection: Connection) {
        if let wait = connection.signalTokens.take(at: clock.milliseconds) {
            let limit = connection.signalTokens.perSecond
            let refusal = KVOError(.rateLimited,
                                   "more than \(connection.signalTokens.capacity) signals at once or \(limit) a second from this connection: this one was not sent (retry in \(wait) ms)",
                                   details: ["limit": .int(Int64(limit)), "retryAfter": .int(Int64(wait))])
            send(.failure(refusal), id: id, to: connection, counting: .signal)
            return
        }
        guard perform(request, id: id, connection: connection), let clusterNode,
              case let .signal(object, payload) = request else { return }
        clusterNode.signals.publish(object: object, payload: payload.canonicalText)
    }

    /// Another node's signal (`SignalRelay`): delivered to this node's observers who may read its object. Its sender
    /// was admitted by its own node; this node's own signals, which come back from NATS, were delivered when sent.
    /// A message that does not parse is logged and dropped.
    func receiveClusterSignal(_ data: [UInt8]) {
        guard case let .object(message)? = try? JSONParser.parse(data),
              case let .string(node)? = message["node"], case let .string(object)? = message["object"],
              let value = message["value"]
        else {
            logger.warning("cluster: a signal message that does not parse was dropped (\(data.count) bytes)")
            return
        }
        guard node != configuration.cluster?.node else { return }
        let payload = CanonicalText(trusting: JSONWriter.bytes(value))
        notifications.removeAll(keepingCapacity: true)
        handler.engine.deliverSignal(to: object, payload: payload, notifications: &notifications)
        deliverNotifications()
    }
}
