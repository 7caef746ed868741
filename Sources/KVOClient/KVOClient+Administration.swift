/// Typed results for the administrative operations: bindings, class definitions and users (docs/protocol.md,
/// "Bindings", "Classes", "Managing users online") and the server's own (`status`, `config`, `digest`, `metrics`). `bindings()`, `classes()` and `userAdministration(_:_:)`
/// stay for the raw JSON. Any thread.
extension KVOClient {
    /// One rule of a user: the objects whose ids match `objects` (a glob: `*` stands for any run of characters)
    /// may be used as `allow` says.
    public struct AccessRule: Sendable, Hashable, Codable {
        /// What a rule allows on its objects.
        public enum Permission: String, Sendable, Hashable, Codable {
            case read, write, admin
        }

        /// The object ids it covers: an exact id or a glob (`sensor-*`).
        public var objects: String
        /// What it allows on them.
        public var allow: [Permission]

        public init(objects: String, allow: [Permission]) {
            self.objects = objects
            self.allow = allow
        }
    }

    /// How much work kvod puts into a new password's Argon2id hash: `interactive` (the default, about 150 ms over
    /// 64 MiB), `moderate`, or `minimal` (tests only: no protection against offline guessing).
    public enum PasswordHashCost: String, Sendable {
        case interactive, moderate, minimal
    }

    /// A user as `userList` shows one (never a password hash).
    public struct UserAccount: Sendable, Equatable, Decodable {
        public let name: String
        public let rules: [AccessRule]
        /// The ids of the user's API tokens (`tokenCreate` shows a token's secret once).
        public let tokens: [String]

        private enum CodingKeys: String, CodingKey { case name, rules, tokens }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            name = try container.decode(String.self, forKey: .name)
            rules = try container.decodeIfPresent([AccessRule].self, forKey: .rules) ?? []
            tokens = try container.decodeIfPresent([String].self, forKey: .tokens) ?? []
        }
    }

    /// A new API token: `token` is its secret (`kvod_<id>_<secret>`, shown this once), `id` names it for `revokeToken`.
    public struct CreatedToken: Sendable, Equatable {
        public let user: String
        public let token: String
        public let id: String
    }

    /// A binding as `bindings` lists it: its definition as given, with its id.
    public struct BindingDefinition: Sendable, Equatable, Decodable {
        public enum Kind: String, Sendable, Equatable, Decodable {
            case bind, combineLatest
        }

        /// The binding's id (never reused).
        public let id: Int64
        public let kind: Kind
        /// `bind`'s source.
        public let from: Endpoint?
        /// `combineLatest`'s sources, `$0`, `$1`, ... in `reduce`.
        public let sources: [Endpoint]
        public let to: Endpoint
        public let filter: String?
        public let convert: String?
        public let reduce: String?
        /// The user who made it, when it was made by an authenticated user.
        public let creator: String?

        private enum CodingKeys: String, CodingKey {
            case id = "binding", kind, from, sources, to, filter, convert, reduce, creator
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            id = try container.decode(Int64.self, forKey: .id)
            kind = try container.decode(Kind.self, forKey: .kind)
            from = try container.decodeIfPresent(Endpoint.self, forKey: .from)
            sources = try container.decodeIfPresent([Endpoint].self, forKey: .sources) ?? []
            to = try container.decode(Endpoint.self, forKey: .to)
            filter = try container.decodeIfPresent(String.self, forKey: .filter)
            convert = try container.decodeIfPresent(String.self, forKey: .convert)
            reduce = try container.decodeIfPresent(String.self, forKey: .reduce)
            creator = try container.decodeIfPresent(String.self, forKey: .creator)
        }
    }

    /// Every binding, sorted by id.
    public func bindingDefinitions() async throws -> [BindingDefinition] {
        try ValueCoding.decode([BindingDefinition].self, from: .array(try await bindings()))
    }

    /// Every class definition, sorted by name, decoded as your `Definition` type (the same shape you give
    /// `defineClass`).
    public func classDefinitions<Definition: Decodable>(as type: Definition.Type) async throws -> [Definition] {
        try ValueCoding.decode([Definition].self, from: .array(try await classes()))
    }

    /// The server at a glance (server admins; docs/protocol.md, `status`): version, uptime, revision, objects,
    /// connections, storage, history, cluster, alarms, as the reply's fields.
    public func serverStatus() async throws -> [String: JSONValue] {
        try await request("status").objectValue ?? [:]
    }

    /// Every setting in force and where it came from (server admins; docs/protocol.md, `config`): one object per
    /// setting (`name`, `value`, `source`, `origin`, `afterRestart`).
    public func serverSettings() async throws -> [JSONValue] {
        try await request("config")["settings"]?.arrayValue ?? []
    }

    /// A digest of the stored state, to compare cluster nodes (server admins; docs/protocol.md, `digest`): the
    /// reply's fields (`digest`, `rev`, `objects`, and in a cluster the node's place in the stream).
    public func stateDigest() async throws -> [String: JSONValue] {
        try await request("digest").objectValue ?? [:]
    }

    /// What `GET /metrics` serves, the Prometheus text (server admins; docs/protocol.md, `metrics`).
    public func metricsText() async throws -> String {
        try await request("metrics")["text"]?.stringValue ?? ""
    }

    /// Every user, sorted by name (administrators only).
    public func users() async throws -> [UserAccount] {
        let reply = try await userAdministration("userList")
        return try ValueCoding.decode([UserAccount].self, from: reply["users"] ?? .array([]))
    }

    /// Adds a user with a password and rules (administrators only; `exists` if the name is taken).
    public func addUser(_ name: String, password: String, rules: [AccessRule] = [],
                        hashCost: PasswordHashCost = .interactive) async throws {
        _ = try await userAdministration("userAdd", ["user": .string(name), "password": .string(password),
                                                    "rules": try ValueCoding.encode(rules),
                                                    "hashCost": .string(hashCost.rawValue)])
    }

    /// Removes a user; returns how many of the user's connections were closed by it.
    @discardableResult
    public func removeUser(_ name: String) async throws -> Int {
        Int(try await userAdministration("userRemove", ["user": .string(name)])["closedConnections"]?.intValue ?? 0)
    }

    /// Sets a user's password (open connections stay open; tokens stay valid).
    public func setPassword(_ password: String, for name: String, hashCost: PasswordHashCost = .interactive) async throws {
        _ = try await userAdministration("userPasswd", ["user": .string(name), "password": .string(password),
                                                       "hashCost": .string(hashCost.rawValue)])
    }

    /// Adds permissions to a user (merged into the rule with the same pattern); returns the user's rules now.
    @discardableResult
    public func grant(_ rules: [AccessRule], to name: String) async throws -> [AccessRule] {
        try await changeRules("userGrant", rules, name)
    }

    /// Takes permissions from a user (a rule left with none is dropped); returns the user's rules now.
    @discardableResult
    public func revoke(_ rules: [AccessRule], from name: String) async throws -> [AccessRule] {
        try await changeRules("userRevoke", rules, name)
    }

    /// Makes an API token for a user; its secret is in the result only.
    public func createToken(for name: String) async throws -> CreatedToken {
        let reply = try await userAdministration("tokenCreate", ["user": .string(name)])
        guard let token = reply["token"]?.stringValue, let id = reply["tokenID"]?.stringValue else {
            throw KVODError.malformedReply("a 'tokenCreate' reply without token or tokenID")
        }
        return CreatedToken(user: name, token: token, id: id)
    }

    /// Revokes a user's token by its id (`not_found` when the user has no such token).
    public func revokeToken(_ id: String, of name: String) async throws {
        _ = try await userAdministration("tokenRevoke", ["user": .string(name), "token": .string(id)])
    }

    private func changeRules(_ op: String, _ rules: [AccessRule], _ name: String) async throws -> [AccessRule] {
        let reply = try await userAdministration(op, ["user": .string(name), "rules": try ValueCoding.encode(rules)])
        return try ValueCoding.decode([AccessRule].self, from: reply["rules"] ?? .array([]))
    }
}
