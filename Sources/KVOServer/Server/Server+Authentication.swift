import CLibUV
import KVOEngine
import KVOJSON
import KVOModel
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// Logging connections in: password checks off the loop, API tokens, failures and their limits.
/// Loop thread only, like the rest of `Server`.
extension Server {
    /// The reply to any request but hello, auth and ping before a successful `auth`.
    static let notAuthenticated = RequestDecoder.loginRequired
    /// The reply to wrong credentials, the same whether the user exists or not.
    static let wrongCredentials = KVOError(.unauthenticated, "wrong user name or password")

    /// Starts checking a password on the thread pool; the connection's later requests wait for the
    /// answer (`Connection.pauseForVerification`). An unknown user is checked against a dummy hash of
    /// the users' most common cost, so that the answer takes as long and reads the same as for a wrong
    /// password.
    func authenticate(_ credentials: AuthCredentials, id: JSONValue?, connection: Connection) {
        switch credentials {
        case let .password(userName, password):
            let user = users.user(named: userName)
            let verification = PasswordVerification(
                connection: connection.id, peerHost: Server.host(ofPeer: connection.peer), userName: userName,
                userExists: user != nil, requestID: id, connectionFailures: connection.authenticationFailures,
                sequence: passwordChecks.takeSequence(), hash: user?.passwordHash ?? users.unknownUserHash,
                password: password, requestStarted: requestStarted)
            connection.pauseReading(.verification)
            if let turnedAway = passwordChecks.submit(verification, now: clock.milliseconds) {
                turnAway(turnedAway)
            }
        case let .token(text):
            // Cheap (a BLAKE2b hash of 32 bytes): checked here, on the loop thread.
            if let user = users.user(presentingToken: text) {
                logIn(connection, as: user, id: id)
            } else {
                authenticationFailed(connection, userName: nil, id: id)
                passwordChecks.peerFailures.recordFailure(of: Server.host(ofPeer: connection.peer), now: clock.milliseconds)
            }
        }
    }

    /// A check the full queue could not take: answered without a check (not counted as a failure).
    func turnAway(_ verification: PasswordVerification) {
        verification.wipePassword()
        guard let connection = connection(verification.connection)?.takeUnretainedValue() else { return }
        let error = KVOError(.unauthenticated, "too many logins are waiting to be checked; try again shortly")
        send(.failure(error), id: verification.requestID, to: connection, counting: .auth,
             startedAt: verification.requestStarted)
        connection.resumeReading(.verification)
    }

    /// A password check is back (loop thread): log the connection in, or count a failure.
    func passwordCheckFinished(_ verification: PasswordVerification) {
        guard let connection = connection(verification.connection)?.takeUnretainedValue(), !connection.isClosing else { return }
        continuingRequest(startedAt: verification.requestStarted) {
            // The user may have been removed, or its password changed, while the check ran.
            if verification.matched, let user = users.user(named: verification.userName),
               user.passwordHash == verification.checkedHash {
                logIn(connection, as: user, id: verification.requestID)
            } else {
                authenticationFailed(connection, userName: verification.userName, id: verification.requestID)
                passwordChecks.peerFailures.recordFailure(of: verification.peerHost, now: clock.milliseconds)
            }
        }
        connection.resumeReading(.verification)
    }

    /// The connection now acts for `user`, with its rules compiled once here.
    func logIn(_ connection: Connection, as user: UserRecord, id: JSONValue?) {
        connection.principal = Principal(user: user.name, policy: policy(ofUser: user.name) ?? AccessPolicy(rules: user.rules))
        send(.success([("user", .string(user.name))]), id: id, to: connection, counting: .auth)
        passwordChecks.recordSuccess(of: Server.host(ofPeer: connection.peer), now: clock.milliseconds)
        // A second login on a connection (as another user) re-checks what it observes.
        principalDidChange(of: connection)
        logger.debug("authenticated", metadata: [
            "connection": "\(connection.id)", "peer": "\(connection.peer)", "user": "\(user.name)",
        ])
    }

    /// Answers a failed `auth` (`unauthenticated`, the same reply whatever was wrong), logs it
    /// (rate-limited) and closes the connection at the failure limit.
    func authenticationFailed(_ connection: Connection, userName: String?, id: JSONValue?) {
        connection.authenticationFailures += 1
        metrics.countRequest(.auth, error: .unauthenticated)
        requestAnswered(.auth, startedAt: requestStarted)
        if let count = rateLimitedLog.authenticationFailures.record(at: clock.milliseconds) {
            let others = count > 1 ? " (and \(count - 1) more since the last line)" : ""
            let who = userName.map { "user '\(PrintableText.escaped($0, limit: 64))'" } ?? "an API token"
            logger.warning("authentication failed for \(who) from \(connection.peer)\(others)",
                           metadata: ["connection": "\(connection.id)"])
        }
        Server.empty(&replyBuffer)
        // How many more failures this connection may have before it is closed: the client can say so (the
        // inspector's "too many failed attempts") instead of seeing its connection drop unexplained. It depends
        // only on the count, so the reply still reads the same whatever was wrong.
        let attemptsLeft = max(configuration.maximumAuthenticationFailures - connection.authenticationFailures, 0)
        let refusal = KVOError(.unauthenticated, Server.wrongCredentials.message,
                               details: ["attemptsLeft": .int(Int64(attemptsLeft))])
        ReplyEncoder.failure(id: id, error: refusal, into: &replyBuffer)
        if connection.authenticationFailures >= configuration.maximumAuthenticationFailures {
            connection.sendAndClose(replyBuffer, reason: .authenticationFailures(connection.authenticationFailures))
        } else {
            connection.enqueue(replyBuffer)
        }
    }

    /// "127.0.0.1" of "127.0.0.1:50312", "::1" of "[::1]:50312".
    static func host(ofPeer peer: String) -> String {
        guard let colon = peer.lastIndex(of: ":") else { return peer }
        var host = peer[..<colon]
        if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        return String(host)
    }
}
