import CLibUV
import KVOJSON
import Logging
#if canImport(Glibc)
import Glibc
import KVOEngine
import KVOModel
#endif

/// The HTTP listener's routes: Host check, WebSocket upgrade, health, metrics and the web assets.
/// Loop thread only, like the rest of `Server`.
extension Server {
    /// Routes one HTTP request: `/ws` upgrades to WebSocket (the JSON-lines protocol, one message per text
    /// frame), `/healthz`, `/readyz` and `/metrics` answer at once, `/` and its files and `/kvod.js` come from
    /// `WebAssets` (the inspector page and the JavaScript client); anything else is 404 (405 for a method
    /// other than GET). A keep-alive connection then has `--first-request-timeout` for its next request.
    /// Before any of that, the request's `Host` must pass `HTTPHostCheck` (DNS rebinding), and `/metrics`
    /// may need a token (`HTTPMetricsAccess`). Loop thread.
    func connection(_ connection: Connection, didReceiveHTTPRequest request: HTTPRequestHead) {
        connection.hasSentRequest = true
        // The one Host check, before routing: every path, method and upgrade goes through it.
        guard let hostCheck = httpHostCheck else {  // never: made when the HTTP listener is bound
            self.connection(connection, didRefuseHTTPRequest: .serviceUnavailable, reason: "no HTTP listener")
            return
        }
        let host: HTTPAuthority?
        switch hostCheck.check(host: request.headers["host"], minorVersion: request.minorVersion) {
        case let .success(checked): host = checked
        case let .failure(refusal):
            self.connection(connection, didRefuseHTTPRequest: refusal.status, reason: refusal.reason)
            return
        }
        let keepAlive = request.keepAlive
        if request.path == "/ws" {
            // A connection that carried HTTP API requests acts for their tokens' users: a WebSocket must start afresh
            // (and `auth`), so it needs a connection of its own (browsers open one for each WebSocket anyway).
            if let framing = connection.framing as? HTTPFraming, framing.hasServedAPIRequests {
                self.connection(connection, didRefuseHTTPRequest: .badRequest,
                                reason: "a connection that carried HTTP API requests is not upgraded to WebSocket: open a new one")
                return
            }
            upgrade(connection, request, host: host, hostCheck: hostCheck)
            return
        }
        if request.path.hasPrefix("/v1/") {
            serveAPIRequest(request, on: connection, host: host, hostCheck: hostCheck)
            return
        }
        guard request.method == "GET" else {
            answer(connection, HTTPResponse.text(.methodNotAllowed, "only GET is served here", keepAlive: keepAlive,
                                                 extraHeaders: [("Allow", "GET")]), keepAlive: keepAlive)
            return
        }
        switch request.path {
        case "/healthz":
            answer(connection, HTTPResponse.text(.ok, "ok", keepAlive: keepAlive), keepAlive: keepAlive)
        case "/readyz":
            // A server whose store cannot write, or a cluster node that does not apply the stream, is not
            // ready: it refuses writes (its reason).
            let notReady = isStopping ? "stopping" : storage.health.reason ?? cluster?.health.reason
            answer(connection, HTTPResponse.text(notReady == nil ? .ok : .serviceUnavailable, notReady ?? "ready",
                                                 keepAlive: keepAlive), keepAlive: keepAlive)
        case "/metrics":
            if let refusal = metricsRefusal(connection, request) {
                answer(connection, HTTPResponse.text(refusal.status, refusal.reason, keepAlive: keepAlive, extraHeaders: refusal.headers),
                       keepAlive: keepAlive)
                return
            }
            answer(connection, HTTPResponse.make(.ok, contentType: "text/plain; version=0.0.4; charset=utf-8",
                                                 body: renderMetrics(), keepAlive: keepAlive), keepAlive: keepAlive)
        default:
            if let asset = WebAsset.named(request.path) {
                answer(connection, HTTPResponse.make(.ok, contentType: asset.contentType, body: asset.body, keepAlive: keepAlive,
                                                     extraHeaders: [("Content-Security-Policy", WebAsset.contentSecurityPolicy),
                                                                    ("Referrer-Policy", "no-referrer")]),
                       keepAlive: keepAlive)
            } else {
                answer(connection, HTTPResponse.text(.notFound, "not found", keepAlive: keepAlive), keepAlive: keepAlive)
            }
        }
    }

    func connection(_ connection: Connection, didRefuseHTTPRequest status: HTTPStatus, reason: String) {
        connection.sendHTTPResponse(HTTPResponse.text(status, reason, keepAlive: false), keepAlive: false,
                                    reason: .httpRefused(status: status.rawValue, reason: reason))
    }

    /// Sends an HTTP response; on a keep-alive connection the next request must come within the first-request timeout.
    func answer(_ connection: Connection, _ response: [UInt8], keepAlive: Bool) {
        connection.sendHTTPResponse(response, keepAlive: keepAlive)
        guard keepAlive, !connection.isClosing, configuration.firstRequestTimeout > 0 else { return }
        connection.hasSentRequest = false
        deadlines.firstRequest.add(connection.id,
                                   deadline: ConnectionDeadlines.deadline(configuration.firstRequestTimeout, after: clock.milliseconds))
    }

    /// `GET /metrics` on a non-loopback listener with users defined: why it is refused without a server
    /// admin's bearer token (`HTTPMetricsAccess`); nil to serve it. A wrong token counts against the peer
    /// like a failed `auth`.
    func metricsRefusal(_ connection: Connection, _ request: HTTPRequestHead)
        -> (status: HTTPStatus, reason: String, headers: [(String, String)])? {
        let decision = HTTPMetricsAccess.decide(
            authorization: request.headers["authorization"], usersDefined: !users.isEmpty,
            listenerIsLoopback: listener(.http)?.isLoopback ?? true
        ) { token in
            users.user(presentingToken: token).flatMap { user in policy(ofUser: user.name).map { (user.name, $0) } }
        }
        if decision == .invalidToken {
            passwordChecks.peerFailures.recordFailure(of: Server.host(ofPeer: connection.peer), now: clock.milliseconds)
        }
        return HTTPMetricsAccess.refusal(decision)
    }

    /// `GET /ws`: checks the Origin (`HTTPHostCheck.allows`) and the handshake, then switches the connection to WebSocket.
    func upgrade(_ connection: Connection, _ request: HTTPRequestHead, host: HTTPAuthority?, hostCheck: HTTPHostCheck) {
        guard hostCheck.allows(origin: request.headers["origin"], host: host) else {
            let reason = "origin '\(PrintableText.escaped(request.headers["origin"] ?? "", limit: 200))' is not this listener's own and not allowed (--http-allowed-origin)"
            connection.sendHTTPResponse(HTTPResponse.text(.forbidden, reason, keepAlive: false), keepAlive: false,
                                        reason: .httpRefused(status: 403, reason: reason))
            return
        }
        switch WebSocketHandshake.accept(request) {
        case let .failure(refusal):
            let headers = refusal.status == .upgradeRequired ? [("Sec-WebSocket-Version", "13"), ("Upgrade", "websocket")] : []
            connection.sendHTTPResponse(HTTPResponse.text(refusal.status, refusal.reason, keepAlive: false, extraHeaders: headers),
                                        keepAlive: false, reason: .httpRefused(status: refusal.status.rawValue, reason: refusal.reason))
        case let .success(accept):
            let wasOpenAs = connection.metricsTransport
            guard connection.upgradeToWebSocket(accept: accept) else { return }
            metrics.connectionUpgraded(from: wasOpenAs, to: .webSocket)
            if connection.principal == nil { addLoginDeadline(for: connection) }
        }
    }

    /// `GET /metrics`: the Prometheus text exposition of `metrics` and the current gauges. Loop thread.
    func renderMetrics() -> [UInt8] {
        let engine = handler.engine
        return metrics.render(ServerMetrics.Gauges(
            objects: engine.objectCount, observations: engine.observationCount, revision: engine.revision,
            historyEntries: engine.historyCount, historyBytes: engine.historyBytes, storedBytes: engine.storedBytes,
            outputBufferedBytes: loop.outputChunks.bytesInUse, inputBufferedBytes: loop.bufferedInputBytes,
            cluster: cluster.map {
                ServerMetrics.ClusterGauges(state: $0.health.gauge, appliedSequence: $0.appliedSequence,
                                            checkpointsAgreed: $0.integrity.checkpointsAgreed,
                                            checkpointDisagreements: $0.integrity.checkpointDisagreements)
            },
            maximumDiskBytes: configuration.storage?.maximumDiskBytes ?? 0,
            sessions: sessions.count, detachedSessions: sessions.detachedCount, sessionActionBytes: sessions.totalActionBytes))
    }
}
