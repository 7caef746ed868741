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
        framing.hasServedAPIRequests = true
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
        // CORS: a page of an allowed other origin (`--http-allowed-origin`) may read the responses; its preflight is
        // answered here. Same-origin pages and programs need none of it.
        let cors = HTTPAPICORS.headers(origin: request.headers["origin"], host: host, hostCheck: hostCheck)
        if request.method == "OPTIONS" {
            answer(connection, HTTPResponse.make(.noContent, body: [], keepAlive: keepAlive,
                                                 extraHeaders: cors + HTTPAPICORS.preflightHeaders), keepAlive: keepAlive)
            return
        }
        func refuse(_ problem: HTTPAPIProblem) {
            var problem = problem
            problem.headers += cors
            let response = problem.response(keepAlive: keepAlive)
            self.answer(connection, request.method == "HEAD" ? HTTPResponse.headOnly(response) : response, keepAlive: keepAlive)
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
                refuse(HTTPAPIProblem(status: .unauthorized, code: "unauthenticated",
                                      detail: "Authorization: Bearer <API token> (kvod user token) did not name a user",
                                      headers: [("WWW-Authenticate", "Bearer realm=\"kvod\", error=\"invalid_token\"")]))
                return
            }
            connection.principal = Principal(user: user.name, policy: policy(ofUser: user.name) ?? AccessPolicy(rules: user.rules))
        } else {
            connection.principal = nil
        }
        if request.path == "/v1/openapi.json", let document = WebAsset.named(request.path) {
            guard request.method == "GET" || request.method == "HEAD" else {
                refuse(.methodNotAllowed(request.method, allowed: "GET, HEAD"))
                return
            }
            let response = HTTPResponse.make(.ok, contentType: document.contentType, body: document.body, keepAlive: keepAlive, extraHeaders: cors)
            answer(connection, request.method == "HEAD" ? HTTPResponse.headOnly(response) : response, keepAlive: keepAlive)
            return
        }
        if request.path == "/v1/tickets" {
            issueStreamTicket(request, on: connection, cors: cors)
            return
        }
        switch HTTPAPIRoute.translate(request) {
        case let .failure(problem):
            refuse(problem)
        case var .success(translation):
            translation.exchange.extraHeaders = cors
            if let ticket = translation.ticket {
                // A stream's ticket stands for the token it was issued for, once (`StreamTickets`).
                guard request.headers["authorization"] == nil else {
                    refuse(.badRequest("a ticket or an Authorization header, not both", field: "ticket"))
                    return
                }
                guard let user = streamTickets.redeem(ticket, now: clock.milliseconds) else {
                    passwordChecks.peerFailures.recordFailure(of: Server.host(ofPeer: connection.peer), now: clock.milliseconds)
                    refuse(HTTPAPIProblem(status: .unauthorized, code: "unauthenticated",
                                          detail: "the ticket is unknown, used or expired (POST /v1/tickets gives one, good once for 30 s)"))
                    return
                }
                if let user, let known = users.user(named: user) {
                    connection.principal = Principal(user: known.name, policy: policy(ofUser: known.name) ?? AccessPolicy(rules: known.rules))
                } else {
                    connection.principal = users.isEmpty ? .open : nil
                }
            }
            framing.expectReply(translation.exchange, on: connection)
            translation.line.withUnsafeBufferPointer { handleLine($0, from: connection) }
        }
    }

    /// `POST /v1/tickets`: a stream ticket for the request's user (its Bearer token, checked above; everyone in open
    /// mode), `201 {"ticket": "kvodt_…", "expiresIn": 30}`. A request without a user is 401, as any.
    private func issueStreamTicket(_ request: HTTPRequestHead, on connection: Connection, cors: [(String, String)]) {
        let keepAlive = request.keepAlive
        let refusal: HTTPAPIProblem? = if request.method != "POST" {
            .methodNotAllowed(request.method, allowed: "POST")
        } else if !request.body.isEmpty || request.query.map({ !$0.isEmpty }) == true {
            .badRequest("POST /v1/tickets takes no body and no query parameter")
        } else if connection.principal == nil {
            HTTPAPIProblem(status: .unauthorized, code: "unauthenticated", detail: "a ticket is issued for a Bearer token's user",
                           headers: [("WWW-Authenticate", "Bearer realm=\"kvod\"")])
        } else {
            nil
        }
        if var refusal {
            refusal.headers += cors
            answer(connection, refusal.response(keepAlive: keepAlive), keepAlive: keepAlive)
            return
        }
        guard let ticket = streamTickets.issue(for: connection.principal?.user, now: clock.milliseconds) else {
            answer(connection, HTTPAPIProblem(status: .tooManyRequests, code: "rate_limited",
                                              detail: "too many stream tickets outstanding; use or let expire the ones issued",
                                              headers: cors).response(keepAlive: keepAlive), keepAlive: keepAlive)
            return
        }
        var body: [UInt8] = Array(#"{"expiresIn":"#.utf8)
        JSONWriter.writeInteger(Int(StreamTickets.lifetimeMilliseconds / 1000), into: &body)
        body += Array(#","ticket":"#.utf8)
        JSONWriter.writeString(ticket, into: &body)
        body += Array("}\n".utf8)
        answer(connection, HTTPResponse.make(.created, contentType: "application/json", body: body, keepAlive: keepAlive, extraHeaders: cors),
               keepAlive: keepAlive)
    }
}
