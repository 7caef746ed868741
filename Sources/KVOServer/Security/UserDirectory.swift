import KVOEngine
import KVOJSON

/// The users kvod knows: name -> password hash and rules.
///
/// Owned by the server and used on its loop thread only (lookups at `auth`, changes by the admin
/// operations); the `kvod user` commands own one of their own. Not thread-safe.
package final class UserDirectory {
    private(set) var records: [String: UserRecord] = [:] {
        didSet { unknownUserHashCache = nil }
    }
    /// `unknownUserHash` once made; dropped at every change (the most common cost may have changed).
    var unknownUserHashCache: String?
    /// Token id -> the user holding it (ids are random: a clash is refused at creation).
    private var tokenOwners: [String: String] = [:]

    package init(_ users: [UserRecord] = []) {
        for user in users { insert(user) }
    }

    /// Replaces every user by `users` (a cluster node installing a snapshot while it serves).
    package func replaceAll(with users: [UserRecord]) {
        records.removeAll()
        tokenOwners.removeAll()
        for user in users { insert(user) }
    }

    private func insert(_ user: UserRecord) {
        records[user.name] = user
        for token in user.tokens { tokenOwners[token.id] = user.name }
    }

    /// No users: open mode is possible (docs/protocol.md, "Open and protected mode").
    package var isEmpty: Bool { records.isEmpty }
    package var count: Int { records.count }

    /// Every user, sorted by name.
    package var users: [UserRecord] { records.values.sorted { $0.name < $1.name } }

    package func user(named name: String) -> UserRecord? { records[name] }

    /// Adds a new user; an existing name is an error.
    package func add(_ user: UserRecord) throws(UserDirectoryError) {
        if let problem = UserRecord.problem(withName: user.name) { throw UserDirectoryError(problem) }
        guard records[user.name] == nil else { throw UserDirectoryError("user '\(user.name)' exists already", kind: .exists) }
        for token in user.tokens where tokenOwners[token.id] != nil {
            throw UserDirectoryError("token '\(token.id)' is another user's")
        }
        insert(user)
    }

    /// Removes a user and returns it.
    @discardableResult
    package func remove(_ name: String) throws(UserDirectoryError) -> UserRecord {
        guard let user = records.removeValue(forKey: name) else { throw UserDirectoryError(UserDirectory.noSuchUser(name), kind: .notFound) }
        for token in user.tokens { tokenOwners.removeValue(forKey: token.id) }
        return user
    }

    /// Replaces a user's password hash.
    package func setPasswordHash(_ hash: String, of name: String) throws(UserDirectoryError) {
        guard records[name] != nil else { throw UserDirectoryError(UserDirectory.noSuchUser(name), kind: .notFound) }
        records[name]!.passwordHash = hash
    }

    /// Adds `rules` to a user's (permissions merge into an existing rule with the same pattern).
    package func grant(_ rules: [AccessRule], to name: String) throws(UserDirectoryError) {
        guard var user = records[name] else { throw UserDirectoryError(UserDirectory.noSuchUser(name), kind: .notFound) }
        for rule in rules {
            if let index = user.rules.firstIndex(where: { $0.objects == rule.objects }) {
                user.rules[index].allow.formUnion(rule.allow)
            } else {
                user.rules.append(rule)
            }
        }
        records[name] = user
    }

    /// Takes `rules`' permissions away from the user's rules with the same pattern (a rule left with
    /// none is dropped). Revoking what a glob allows does not touch other patterns.
    package func revoke(_ rules: [AccessRule], from name: String) throws(UserDirectoryError) {
        guard var user = records[name] else { throw UserDirectoryError(UserDirectory.noSuchUser(name), kind: .notFound) }
        for rule in rules {
            guard let index = user.rules.firstIndex(where: { $0.objects == rule.objects }) else { continue }
            user.rules[index].allow.subtract(rule.allow)
            if user.rules[index].allow.isEmpty { user.rules.remove(at: index) }
        }
        records[name] = user
    }

    /// Makes a new API token for a user; returns its text (shown once) and id.
    package func createToken(for name: String) throws(UserDirectoryError) -> (text: String, id: String) {
        guard records[name] != nil else { throw UserDirectoryError(UserDirectory.noSuchUser(name), kind: .notFound) }
        var made = APIToken.generate()
        while tokenOwners[made.token.id] != nil { made = APIToken.generate() }
        try addToken(made.token, to: name)
        return (made.text, made.token.id)
    }

    /// Whether a token with this id exists (any user's).
    package func hasToken(id: String) -> Bool { tokenOwners[id] != nil }

    /// Gives a user a token made elsewhere (`UserChange.addToken`: made by the node that took the
    /// request). An id already in use is refused.
    package func addToken(_ token: APIToken, to name: String) throws(UserDirectoryError) {
        guard records[name] != nil else { throw UserDirectoryError(UserDirectory.noSuchUser(name), kind: .notFound) }
        guard tokenOwners[token.id] == nil else { throw UserDirectoryError("token '\(token.id)' exists already", kind: .exists) }
        records[name]!.tokens.append(token)
        tokenOwners[token.id] = name
    }

    /// Revokes a user's token by id.
    package func revokeToken(_ id: String, of name: String) throws(UserDirectoryError) {
        guard records[name] != nil else { throw UserDirectoryError(UserDirectory.noSuchUser(name), kind: .notFound) }
        guard let index = records[name]!.tokens.firstIndex(where: { $0.id == id }) else {
            throw UserDirectoryError("user '\(name)' has no token '\(PrintableText.escaped(id, limit: 64))'", kind: .notFound)
        }
        records[name]!.tokens.remove(at: index)
        tokenOwners.removeValue(forKey: id)
    }

    /// The user a token's text authenticates, or nil (malformed, unknown id, wrong secret). Cheap: a
    /// parse, a lookup by id, a BLAKE2b hash of 32 bytes and a constant-time comparison.
    package func user(presentingToken text: String) -> UserRecord? {
        guard let (id, secret) = APIToken.parse(text), let owner = tokenOwners[id], let user = records[owner],
              let token = user.tokens.first(where: { $0.id == id }), token.matches(secret: secret)
        else { return nil }
        return user
    }

    static func noSuchUser(_ name: String) -> String { "no user '\(PrintableText.escaped(name, limit: 64))'" }

    // MARK: - Users file form

    /// The users file's content: `{"users":[user, …]}`, one user per line, sorted by name.
    package var fileText: String {
        let lines = users.map { "  " + JSONWriter.string($0.json) }
        return "{\"users\": [\n" + lines.joined(separator: ",\n") + (lines.isEmpty ? "" : "\n") + "]}\n"
    }

    /// Reads the users file form (see `fileText`); every problem is an error naming the user.
    package convenience init(fileText: [UInt8]) throws(UserDirectoryError) {
        let value: JSONValue
        do { value = try JSONParser.parse(fileText) } catch { throw UserDirectoryError("not JSON: \(error)") }
        guard case let .object(fields) = value, case let .array(items)? = fields["users"] else {
            throw UserDirectoryError("a users file is an object {\"users\":[…]}")
        }
        self.init()
        for item in items {
            let user = try UserRecord(json: item)
            guard records[user.name] == nil else { throw UserDirectoryError("user '\(user.name)' appears twice") }
            try add(user)
        }
    }
}
