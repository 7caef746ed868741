import KVOEngine
import KVOJSON
import KVOModel

/// The HTTP API (`/v1/…`, docs/protocol.md "HTTP API"): who the request is from (`Authorization: Bearer` with an API
/// token; everyone in open mode), then the request line it stands for (`HTTPAPIRoute`), handled by `handleLine` as
/// any line is: one door for the operations table's rows, the read and write checks, the store's health, limits and
/// replication. Its reply becomes the HTTP response in the connection's `HTTPFraming`. Loop thread only.
extension Server {
    func serveAPIRequest(_ request: HTTPRequestHead, on connection: Connection, host: HTTPAuthority?, hostCheck: HTTPHostCheck) {
        guard let framing = connection.framing as? HTTPFraming else { return }
        let keepAlive = request.keepAlive
        // A browser page of another origin may send a "simple" cross-origin POST (no preflight) to a loopback kvod in
        // open mode: its Origin must be this listener's own or allowed, as for /ws. Clients that are not browsers
        // send no Origin.
        guard hostCheck.allows(origin: request.headers["origin"], host: host) else {
            answer(connection, HTTPAPIProblem(status: .forbidden, code: "forbidden",
                                              detail: "origin '\(PrintableText.escaped(request.headers["origin"] ?? "", limit: 200))' is not this listener's own and not allowed (--http-allowed-origin)")
                       .response(keepAlive: keepAlive), keepAlive: keepAlive)
            return
        }
        // Each request says who it is from: a keep-alive connection's earlier token does not carry over.
        if users.isEmpty {
            connection.principal = .open
        } else if let authorization = request.headers["authorization"] {
            let parts = authorization.split(separator: " ", maxSplits: 1)
            guard parts.count == 2, parts[0].lowercased() == "bearer",
                  let user = users.user(presentingToken: String(parts[1].trimmingSpaces)) else {
                passwordChecks.peerFailures.recordFailure(of: Server.host(ofPeer: connection.peer), now: clock.milliseconds)
                connection.principal = nil
                answer(connection, HTTPAPIProblem(status: .unauthorized, code: "unauthenticated",
                                                  detail: "Authorization: Bearer <API token> (kvod user token) did not name a user",
                                                  headers: [("WWW-Authenticate", "Bearer realm=\"kvod\", error=\"invalid_token\"")])
                           .response(keepAlive: keepAlive), keepAlive: keepAlive)
                return
            }
            connection.principal = Principal(user: user.name, policy: policy(ofUser: user.name) ?? AccessPolicy(rules: user.rules))
        } else {
            connection.principal = nil
        }
        switch HTTPAPIRoute.translate(request) {
        case let .failure(problem):
            let response = problem.response(keepAlive: keepAlive)
            answer(connection, request.method == "HEAD" ? HTTPResponse.headOnly(response) : response, keepAlive: keepAlive)
        case let .success(translation):
            framing.expectReply(translation.exchange, on: connection)
            translation.line.withUnsafeBufferPointer { handleLine($0, from: connection) }
        }
    }
}
