import KVOJSON

/// The users kvod knows: name -> password hash and rules.
///
/// Owned by the server and used on its loop thread only (lookups at `auth`, changes by the admin
/// operations); the `kvod user` commands own one of their own. Not thread-safe.
public final class UserDirectory {
    private(set) var records: [String: UserRecord] = [:]

    public init(_ users: [UserRecord] = []) {
        for user in users { records[user.name] = user }
    }

    /// No users: open mode is possible (docs/protocol.md, "Open and protected mode").
    public var isEmpty: Bool { records.isEmpty }
    public var count: Int { records.count }

    /// Every user, sorted by name.
    public var users: [UserRecord] { records.values.sorted { $0.name < $1.name } }

    public func user(named name: String) -> UserRecord? { records[name] }

    /// Adds a new user; an existing name is an error.
    public func add(_ user: UserRecord) throws(UserDirectoryError) {
        if let problem = UserRecord.problem(withName: user.name) { throw UserDirectoryError(problem) }
        guard records[user.name] == nil else { throw UserDirectoryError("user '\(user.name)' exists already") }
        records[user.name] = user
    }

    /// Removes a user and returns it.
    @discardableResult
    public func remove(_ name: String) throws(UserDirectoryError) -> UserRecord {
        guard let user = records.removeValue(forKey: name) else { throw UserDirectoryError(UserDirectory.noSuchUser(name)) }
        return user
    }

    /// Replaces a user's password hash.
    public func setPasswordHash(_ hash: String, of name: String) throws(UserDirectoryError) {
        guard records[name] != nil else { throw UserDirectoryError(UserDirectory.noSuchUser(name)) }
        records[name]!.passwordHash = hash
    }

    /// Adds `rules` to a user's (permissions merge into an existing rule with the same pattern).
    public func grant(_ rules: [AccessRule], to name: String) throws(UserDirectoryError) {
        guard var user = records[name] else { throw UserDirectoryError(UserDirectory.noSuchUser(name)) }
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
    public func revoke(_ rules: [AccessRule], from name: String) throws(UserDirectoryError) {
        guard var user = records[name] else { throw UserDirectoryError(UserDirectory.noSuchUser(name)) }
        for rule in rules {
            guard let index = user.rules.firstIndex(where: { $0.objects == rule.objects }) else { continue }
            user.rules[index].allow.subtract(rule.allow)
            if user.rules[index].allow.isEmpty { user.rules.remove(at: index) }
        }
        records[name] = user
    }

    static func noSuchUser(_ name: String) -> String { "no user '\(PrintableText.escaped(name, limit: 64))'" }

    // MARK: - Users file form

    /// The users file's content: `{"users":[user, …]}`, one user per line, sorted by name.
    public var fileText: String {
        let lines = users.map { "  " + JSONWriter.string($0.json) }
        return "{\"users\": [\n" + lines.joined(separator: ",\n") + (lines.isEmpty ? "" : "\n") + "]}\n"
    }

    /// Reads the users file form (see `fileText`); every problem is an error naming the user.
    public convenience init(fileText: [UInt8]) throws(UserDirectoryError) {
        let value: JSONValue
        do { value = try JSONParser.parse(fileText) } catch { throw UserDirectoryError("not JSON: \(error)") }
        guard case let .object(fields) = value, case let .array(items)? = fields["users"] else {
            throw UserDirectoryError("a users file is an object {\"users\":[…]}")
        }
        self.init()
        for item in items {
            let user = try UserRecord(json: item)
            guard records[user.name] == nil else { throw UserDirectoryError("user '\(user.name)' appears twice") }
            records[user.name] = user
        }
    }
}
