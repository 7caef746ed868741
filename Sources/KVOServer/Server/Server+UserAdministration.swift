import CLibUV
import KVOEngine
import KVOJSON
import KVOModel
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// User administration online: userAdd, userRemove, grants, tokens, and persisting the users.
/// Loop thread only, like the rest of `Server`.
extension Server {
    /// An admin operation: its row admits server admins only (`OperationDeclaration.admit`). `userList` is answered from this node's users; every
    /// other operation becomes a `UserChange` (a new password is hashed on the thread pool first, the
    /// connection waiting for it as for a password check; a new token is made here) and is carried out
    /// by `commit(_:tokenText:id:connection:)`.
    func administer(_ request: AdminRequest, id: JSONValue?, connection: Connection) {
        do throws(KVOError) {
            try Request.admin(request).operation.declaration.admit(connection.access)
        } catch {
            send(.failure(error), id: id, to: connection, counting: .admin)
            return
        }
        switch request {
        case .userList:
            let list = users.users.map { user in
                JSONValue.object(["name": .string(user.name), "rules": .array(user.rules.map(\.json)),
                                  "tokens": .array(user.tokens.map { .string($0.id) })])
            }
            send(.success([("users", .array(list))]), id: id, to: connection, counting: .admin)
        case let .userAdd(name, password, rules, cost):
            // Checked before the slow hash; the change itself decides again when it is applied.
            guard users.user(named: name) == nil else {
                send(.failure(KVOError(.exists, "user '\(name)' exists already")), id: id, to: connection, counting: .admin)
                return
            }
            hashThenCommit(password: password, cost: cost, id: id, connection: connection) { .add(user: name, passwordHash: $0, rules: rules) }
        case let .userPasswd(name, password, cost):
            guard users.user(named: name) != nil else {
                send(.failure(KVOError(.notFound, UserDirectory.noSuchUser(name))), id: id, to: connection, counting: .admin)
                return
            }
            hashThenCommit(password: password, cost: cost, id: id, connection: connection) { .setPassword(user: name, passwordHash: $0) }
        case let .userRemove(name):
            commit(.remove(user: name), id: id, connection: connection)
        case let .userGrant(name, rules):
            commit(.grant(user: name, rules: rules), id: id, connection: connection)
        case let .userRevoke(name, rules):
            commit(.revoke(user: name, rules: rules), id: id, connection: connection)
        case let .tokenCreate(name):
            var made = APIToken.generate()
            while users.hasToken(id: made.token.id) { made = APIToken.generate() }
            commit(.addToken(user: name, token: made.token), tokenText: made.text, id: id, connection: connection)
        case let .tokenRevoke(name, tokenID):
            commit(.revokeToken(user: name, tokenID: tokenID), id: id, connection: connection)
        }
    }

    func hashThenCommit(password: String, cost: PasswordHasher.Cost, id: JSONValue?, connection: Connection,
                                change: @escaping (String) -> UserChange) {
        connection.pauseReading(.verification)
        let started = requestStarted
        let job = PasswordHashJob(requestID: id, connection: connection.id, password: password, cost: cost) {
            [unowned self] job in
            guard let connection = self.connection(job.connection)?.takeUnretainedValue(), !connection.isClosing else { return }
            self.continuingRequest(startedAt: started) {
                switch job.result {
                case let .success(hash): self.commit(change(hash), id: job.requestID, connection: connection)
                case let .failure(error): self.send(.failure(KVOError(.badRequest, "\(error)")), id: job.requestID, to: connection, counting: .admin)
                }
            }
            connection.resumeReading(.verification)
        }
        job.start(on: loop.raw)
    }

    /// Carries out a user change for `connection`: at once in single mode; in cluster mode through the
    /// stream like a write (every node applies it in stream order, and this node answers once it has).
    /// `tokenText`: a new token's text, for the reply only (never replicated or stored).
    func commit(_ change: UserChange, tokenText: String? = nil, id: JSONValue?, connection: Connection) {
        guard let cluster else {
            send(apply(change, tokenText: tokenText), id: id, to: connection, counting: .admin)
            return
        }
        if let refusal = cluster.refusal {
            send(.failure(KVOError(.unavailable, refusal)), id: id, to: connection, counting: .admin)
            return
        }
        let deadline = clock.milliseconds &+ UInt64(cluster.configuration.writeTimeout * 1000)
        cluster.submit(userChange: change, user: connection.principal?.user,
                       writer: ClusterReplicator.Writer(connection: connection.id, requestID: id, operation: .admin,
                                                        deadline: deadline, tokenText: tokenText, started: requestStarted))
        // Counted with the connection's writes in flight: what it sends next is answered after this change.
        if let clusterNode, clusterNode.pipelinedWrites.submitted(connection.id) >= configuration.maximumPendingRequests {
            connection.pauseReading(.replication)
        }
    }

    /// Applies a user change to the users, persists it, and updates the affected connections and
    /// bindings; the reply. The same on every node for the same users (cluster mode); only the reply's
    /// counts of this node's connections differ.
    func apply(_ change: UserChange, tokenText: String?) -> Result<ReplyFields, KVOError> {
        let before = users.user(named: change.user)
        do throws(UserDirectoryError) {
            try change.apply(to: users)
        } catch {
            switch error.kind {
            case .notFound: return .failure(KVOError(.notFound, error.message))
            case .exists: return .failure(KVOError(.exists, error.message))
            case .invalid: return .failure(KVOError(.badRequest, error.message))
            }
        }
        let name = change.user
        // Stored before anything else follows from it: a change the store refuses is undone and refused.
        let removes: Bool
        if case .remove = change { removes = true } else { removes = false }
        if let refusal = persistUsers(changed: removes ? [] : [name], removed: removes ? [name] : []) {
            users.replaceAll(with: users.records.values.filter { $0.name != name } + (before.map { [$0] } ?? []))
            return .failure(refusal)
        }
        switch change {
        case .add:
            logger.notice("user '\(name)' added")
            if users.count == 1 { endOpenMode() }
            return .success([("user", .string(name))])
        case .remove:
            let closed = connections(of: name)
            for connection in closed { connection.close(reason: .userRemoved(name)) }
            // The user's bindings stop (no rights any more).
            compiledPolicies.forget(name)
            handler.engine.recheckBindings(ofUser: name)
            deliverBindingEvents()
            logger.notice("user '\(name)' removed; \(closed.count) connection\(closed.count == 1 ? "" : "s") closed")
            return .success([("user", .string(name)), ("closedConnections", .int(Int64(closed.count)))])
        case .setPassword:
            logger.notice("password of user '\(name)' changed")
            return .success([("user", .string(name))])
        case .grant, .revoke:
            return rulesChanged(of: name)
        case let .addToken(_, token):
            logger.notice("API token '\(token.id)' created for user '\(name)'")
            var reply: [(String, JSONValue)] = [("user", .string(name))]
            if let tokenText { reply.append(("token", .string(tokenText))) }
            reply.append(("tokenID", .string(token.id)))
            return .success(ReplyFields(reply))
        case let .revokeToken(_, tokenID):
            logger.notice("API token '\(PrintableText.escaped(tokenID, limit: 64))' of user '\(name)' revoked")
            return .success([("user", .string(name)), ("revoked", .string(tokenID))])
        }
    }

    /// A user's rules changed (and persisted, by `apply`): every open connection of the user gets a new
    /// `Principal` at once (then `principalDidChange(of:)`).
    func rulesChanged(of name: String) -> Result<ReplyFields, KVOError> {
        guard let user = users.user(named: name) else { return .failure(KVOError(.notFound, UserDirectory.noSuchUser(name))) }
        compiledPolicies.forget(name)
        let policy = self.policy(ofUser: name) ?? AccessPolicy(rules: user.rules)
        let open = connections(of: name)
        for connection in open {
            connection.principal = Principal(user: name, policy: policy)
            principalDidChange(of: connection)
        }
        // The user's bindings are re-checked even when none of its connections is open.
        handler.engine.recheckBindings(ofUser: name)
        deliverBindingEvents()
        logger.notice("rules of user '\(name)' changed; \(open.count) open connection\(open.count == 1 ? "" : "s") updated")
        return .success([("user", .string(name)), ("rules", .array(user.rules.map(\.json))),
                         ("updatedConnections", .int(Int64(open.count)))])
    }

    /// The open connections logged in as `name`. O(connections): admin operations only.
    func connections(of name: String) -> [Connection] {
        slots.compactMap { $0?.takeUnretainedValue() }.filter { !$0.isClosing && $0.principal?.user == name }
    }

    /// Writes the users that changed (or were removed) where they live: the store, when it keeps writes,
    /// or else the users file. Nil when written; otherwise the refusal for the change, which the caller
    /// undoes: a store out of space or failing consistently refuses writes from then on
    /// (`StorageHealth`), like a failed commit; an unknown failure stops kvod without acknowledging it.
    ///
    /// Cluster mode: a node whose store keeps writes writes them with the next group commit, in the
    /// transaction that records the stream sequence applied, so a restarted node never applies a user
    /// change twice or misses one; an in-memory node keeps them in memory only (its users file is the
    /// users it starts from: on a restart it applies the stream again from the start).
    func persistUsers(changed: [String] = [], removed: [String] = []) -> KVOError? {
        if cluster != nil {
            if storage.keepsWrites { uncommittedUsers.formUnion(changed + removed) }
            return nil
        }
        if storage.keepsWrites {
            do throws(StorageError) {
                try store.writeUsers(upserting: changed.compactMap { users.user(named: $0) }, deleting: removed)
                return nil
            } catch {
                refuseWrites(after: store.assess(error), persisting: "a user change")
                return storage.refusal ?? KVOError(.storageUnavailable, "the user change could not be stored")
            }
        }
        guard let path = configuration.usersFile else { return nil }
        do {
            try UsersFile.save(users, to: path)
            return nil
        } catch {
            logger.error("cannot write the users file: \(PrintableText.escaped("\(error)", limit: 1000)); the change is refused")
            return KVOError(.storageUnavailable, "the users file could not be written: \(PrintableText.escaped("\(error)", limit: 300))")
        }
    }
}

extension UserChange {
    /// The administration operation that made this change (its row in `OperationTable`): what a replicated
    /// change is admitted as on every node.
    var operation: ProtocolOperation {
        switch self {
        case .add: .userAdd
        case .remove: .userRemove
        case .setPassword: .userPasswd
        case .grant: .userGrant
        case .revoke: .userRevoke
        case .addToken: .tokenCreate
        case .revokeToken: .tokenRevoke
        }
    }
}
