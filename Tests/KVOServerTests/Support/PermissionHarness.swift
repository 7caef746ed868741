import KVOJSON

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// A request handler over a fresh engine, with connections acting for users given by rules, for
/// permission tests: requests are JSON lines decoded as the server decodes them, and every
/// notification a request caused is kept. Tests only.
final class PermissionHarness {
    let engine = KVOEngine(recordsCommitBatches: true)
    lazy var handler = RequestHandler(engine: engine)
    /// Users' current policies, for bindings' creators (`KVOEngine.creatorPolicy`).
    var policies: [String: AccessPolicy] = [:]
    private var lastConnection: UInt64 = 100

    /// The server-admin connection that sets things up (everything allowed on `*`).
    let admin: Client

    /// One connection acting for a user.
    struct Client {
        let id: ConnectionID
        let access: ConnectionAccess
    }

    /// What one request did.
    struct Outcome {
        let reply: Result<ReplyFields, KVOError>
        let notifications: [ChangeNotification]

        var error: KVOError? {
            if case let .failure(error) = reply { return error }
            return nil
        }

        func field(_ name: String) -> JSONValue? {
            guard case let .success(fields) = reply else { return nil }
            return fields.first { $0.0 == name }?.1
        }
    }

    init() throws {
        admin = Client(id: ConnectionID(1), access: ConnectionAccess(
            Principal(user: "root", policy: AccessPolicy(rules: [try AccessRule(argument: "*=read,write,admin")]))))
        policies["root"] = admin.access.principal.policy
        engine.creatorPolicy = { [unowned self] user in user.flatMap { self.policies[$0] } ?? .unrestricted }
    }

    /// A new connection for `user` with rules in the command-line form (`doc-*=read`).
    func connect(_ user: String, _ rules: [String]) throws -> Client {
        let policy = AccessPolicy(rules: try rules.map { try AccessRule(argument: $0) })
        policies[user] = policy
        lastConnection += 1
        return Client(id: ConnectionID(lastConnection), access: ConnectionAccess(Principal(user: user, policy: policy)))
    }

    /// Replaces `user`'s rules on `client` (and for bindings), as an online grant or revoke would.
    func changeRules(of client: Client, to rules: [String]) throws -> [ChangeNotification] {
        let user = client.access.user!
        let policy = AccessPolicy(rules: try rules.map { try AccessRule(argument: $0) })
        policies[user] = policy
        client.access.replace(Principal(user: user, policy: policy))
        var notifications: [ChangeNotification] = []
        engine.accessChanged(for: client.id, notifications: &notifications)
        engine.recheckBindings(ofUser: user)
        return notifications
    }

    /// Sends one request line as `client`.
    @discardableResult
    func send(_ line: String, as client: Client? = nil) -> Outcome {
        let client = client ?? admin
        let decoded = RequestDecoder.decode(Array(line.utf8))
        guard case let .success(request) = decoded.request else {
            if case let .failure(error) = decoded.request { return Outcome(reply: .failure(error), notifications: []) }
            fatalError("unreachable")
        }
        var notifications: [ChangeNotification] = []
        let outcome = handler.handle(request, from: client.id, access: client.access, notifications: &notifications)
        return Outcome(reply: outcome.reply, notifications: notifications)
    }

    /// Sends as the admin and requires success.
    @discardableResult
    func setUp(_ line: String) throws -> Outcome {
        let outcome = send(line)
        if let error = outcome.error { throw error }
        return outcome
    }

    /// Everything a request could change: objects, revision, classes, bindings, observations.
    struct Snapshot: Equatable {
        let objects: ObjectTable
        let revision: UInt64
        let classes: [JSONValue]
        let bindings: [JSONValue]
        let observations: Int
    }

    var snapshot: Snapshot {
        Snapshot(objects: engine.objects, revision: engine.revision, classes: engine.classDefinitions(),
                 bindings: engine.bindingListings(), observations: engine.observationCount)
    }
}
