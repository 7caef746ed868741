import KVOEngine
import KVOJSON

/// A change to the users with everything that is not deterministic already decided: the password's
/// Argon2id hash (made on the thread pool by the node that took the request) and a new API token (made
/// from random bytes there). An `AdminRequest` becomes one of these before it is applied, in single mode
/// at once and in cluster mode through the stream, so every node applies the same change to the same
/// users and reaches the same outcome, refusals included (docs/design.md, "Users in a cluster").
///
/// Stream form: `{"change":"add","user":"ada","passwordHash":"$argon2id$…","rules":[…]}` and likewise
/// `remove`, `passwd`, `grant`, `revoke`, `tokenAdd` (with `token`: `{"id":…,"hash":…}`) and
/// `tokenRevoke` (with `tokenID`). A value; any thread.
package enum UserChange: Equatable, Sendable {
    case add(user: String, passwordHash: String, rules: [AccessRule])
    case remove(user: String)
    case setPassword(user: String, passwordHash: String)
    case grant(user: String, rules: [AccessRule])
    case revoke(user: String, rules: [AccessRule])
    /// A token made by `APIToken.generate()`; its text is known to the node that made it only.
    case addToken(user: String, token: APIToken)
    case revokeToken(user: String, tokenID: String)

    /// The user the change is about.
    package var user: String {
        switch self {
        case let .add(user, _, _), let .remove(user), let .setPassword(user, _), let .grant(user, _),
             let .revoke(user, _), let .addToken(user, _), let .revokeToken(user, _):
            return user
        }
    }

    /// Applies the change to `directory`. Throws, changing nothing, when it does not apply (a user
    /// that exists or does not, a token id in use): the same on every node that holds the same users.
    package func apply(to directory: UserDirectory) throws(UserDirectoryError) {
        switch self {
        case let .add(user, hash, rules): try directory.add(UserRecord(name: user, passwordHash: hash, rules: rules))
        case let .remove(user): try directory.remove(user)
        case let .setPassword(user, hash): try directory.setPasswordHash(hash, of: user)
        case let .grant(user, rules): try directory.grant(rules, to: user)
        case let .revoke(user, rules): try directory.revoke(rules, from: user)
        case let .addToken(user, token): try directory.addToken(token, to: user)
        case let .revokeToken(user, tokenID): try directory.revokeToken(tokenID, of: user)
        }
    }

    /// The stream form.
    package var json: JSONValue {
        var fields: [String: JSONValue] = ["user": .string(user)]
        switch self {
        case let .add(_, hash, rules):
            fields["change"] = "add"
            fields["passwordHash"] = .string(hash)
            fields["rules"] = .array(rules.map(\.json))
        case .remove:
            fields["change"] = "remove"
        case let .setPassword(_, hash):
            fields["change"] = "passwd"
            fields["passwordHash"] = .string(hash)
        case let .grant(_, rules):
            fields["change"] = "grant"
            fields["rules"] = .array(rules.map(\.json))
        case let .revoke(_, rules):
            fields["change"] = "revoke"
            fields["rules"] = .array(rules.map(\.json))
        case let .addToken(_, token):
            fields["change"] = "tokenAdd"
            fields["token"] = token.json
        case let .revokeToken(_, tokenID):
            fields["change"] = "tokenRevoke"
            fields["tokenID"] = .string(tokenID)
        }
        return .object(fields)
    }

    /// Parses the stream form; the message says what is wrong. Checks what the admin operations check
    /// (user names, rules, hash form), so a forged stream message cannot install what a client could not.
    package init(json: JSONValue) throws(UserDirectoryError) {
        guard case let .object(fields) = json, case let .string(change)? = fields["change"],
              case let .string(user)? = fields["user"]
        else { throw UserDirectoryError("a user change is {\"change\":…,\"user\":…}") }
        if let problem = UserRecord.problem(withName: user) { throw UserDirectoryError(problem) }
        func hash() throws(UserDirectoryError) -> String {
            guard case let .string(text)? = fields["passwordHash"], PasswordHasher.isWellFormedHash(text) else {
                throw UserDirectoryError("user change '\(change)' needs 'passwordHash', an Argon2id hash")
            }
            return text
        }
        func rules() throws(UserDirectoryError) -> [AccessRule] {
            guard case let .array(items)? = fields["rules"] else {
                throw UserDirectoryError("user change '\(change)' needs 'rules', an array")
            }
            var rules: [AccessRule] = []
            for item in items {
                do { rules.append(try AccessRule(json: item)) } catch { throw UserDirectoryError(error.message) }
            }
            return rules
        }
        switch change {
        case "add": self = .add(user: user, passwordHash: try hash(), rules: try rules())
        case "remove": self = .remove(user: user)
        case "passwd": self = .setPassword(user: user, passwordHash: try hash())
        case "grant": self = .grant(user: user, rules: try rules())
        case "revoke": self = .revoke(user: user, rules: try rules())
        case "tokenAdd":
            guard let token = fields["token"] else { throw UserDirectoryError("user change 'tokenAdd' needs 'token'") }
            self = .addToken(user: user, token: try APIToken(json: token))
        case "tokenRevoke":
            guard case let .string(tokenID)? = fields["tokenID"] else {
                throw UserDirectoryError("user change 'tokenRevoke' needs 'tokenID', a string")
            }
            self = .revokeToken(user: user, tokenID: tokenID)
        default:
            throw UserDirectoryError("unknown user change '\(PrintableText.escaped(change, limit: 32))'")
        }
    }
}
