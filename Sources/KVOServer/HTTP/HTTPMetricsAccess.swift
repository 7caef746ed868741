import KVOEngine
import KVOJSON

/// Who may read `GET /metrics` (docs/protocol.md, "Metrics"): anyone when the HTTP listener is bound to a
/// loopback address or no users are defined (open mode); otherwise only a server admin (a user with `admin`
/// on `*`) presenting one of their API tokens as `Authorization: Bearer kvod_…`. The token is checked like
/// `auth` with a token: a BLAKE2b hash, cheap enough for the loop thread. Stateless; any thread.
enum HTTPMetricsAccess {
    /// What to do with one `/metrics` request.
    enum Decision: Equatable {
        /// Serve it: no token needed here.
        case open
        /// Serve it: a server admin's token.
        case granted
        /// 401: no bearer token (or not a well-formed `Authorization: Bearer` value).
        case noToken
        /// 401: a token that is no user's (wrong, malformed or revoked); counts as an authentication failure.
        case invalidToken
        /// 403: a valid token of a user who is not a server admin.
        case notAdmin(user: String)
    }

    /// The answer's status, body and headers for a refusal (nil for `open` and `granted`).
    static func refusal(_ decision: Decision) -> (status: HTTPStatus, reason: String, headers: [(String, String)])? {
        let needs = "/metrics on this listener needs Authorization: Bearer <API token of a user with admin on *> (kvod user token add NAME)"
        switch decision {
        case .open, .granted:
            return nil
        case .noToken:
            return (.unauthorized, needs, [("WWW-Authenticate", "Bearer realm=\"kvod\"")])
        case .invalidToken:
            return (.unauthorized, "the token is not valid; " + needs,
                    [("WWW-Authenticate", "Bearer realm=\"kvod\", error=\"invalid_token\"")])
        case let .notAdmin(user):
            return (.forbidden, "user '\(PrintableText.escaped(user, limit: 64))' is not a server admin (admin on *); " + needs,
                    [("WWW-Authenticate", "Bearer realm=\"kvod\", error=\"insufficient_scope\"")])
        }
    }

    /// Whether `/metrics` needs a token: users are defined and the listener is not bound to loopback
    /// (`TCPListener.isLoopback`: 127.0.0.0/8 or ::1; 0.0.0.0 and :: are not loopback).
    static func needsToken(usersDefined: Bool, listenerIsLoopback: Bool) -> Bool {
        usersDefined && !listenerIsLoopback
    }

    /// The token of an `Authorization: Bearer TOKEN` value (scheme case-insensitive, RFC 6750 section 2.1);
    /// nil for another scheme, an empty token, or repeated headers (joined with ", " by the parser).
    static func bearerToken(_ authorization: String?) -> String? {
        guard let authorization else { return nil }
        let value = Substring(authorization).trimmingSpaces
        guard let space = value.firstIndex(where: { $0 == " " || $0 == "\t" }),
              value[..<space].lowercased() == "bearer"
        else { return nil }
        let token = value[space...].trimmingSpaces
        guard !token.isEmpty, !token.contains(where: { $0 == "," || $0 == " " || $0 == "\t" }) else { return nil }
        return String(token)
    }

    /// The decision for a request with `authorization` (its `Authorization` header). `userOfToken` gives the
    /// token's user name and rules, nil when the token is no user's.
    static func decide(authorization: String?, usersDefined: Bool, listenerIsLoopback: Bool,
                       userOfToken: (String) -> (name: String, policy: AccessPolicy)?) -> Decision {
        guard needsToken(usersDefined: usersDefined, listenerIsLoopback: listenerIsLoopback) else { return .open }
        guard let token = bearerToken(authorization) else { return .noToken }
        guard let user = userOfToken(token) else { return .invalidToken }
        return user.policy.isServerAdmin ? .granted : .notAdmin(user: user.name)
    }
}
