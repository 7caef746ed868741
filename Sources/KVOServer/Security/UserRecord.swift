import KVOEngine
import KVOJSON

/// One user as stored: name, Argon2id password hash (never the password) and access rules.
///
/// Stored form (users file and the store's `users` table): `{"name":"alice","passwordHash":"$argon2id$…",
/// "rules":[{"objects":"sensor-*","allow":["read"]}]}` (docs/protocol.md, "Users file"). A value; any thread.
package struct UserRecord: Equatable, Sendable {
    package var name: String
    /// A `crypto_pwhash_str` string (`PasswordHasher`).
    package var passwordHash: String
    package var rules: [AccessRule]
    /// API tokens (their hashes), in creation order.
    package var tokens: [APIToken]

    package init(name: String, passwordHash: String, rules: [AccessRule] = [], tokens: [APIToken] = []) {
        self.name = name
        self.passwordHash = passwordHash
        self.rules = rules
        self.tokens = tokens
    }

    /// Longest user name, in bytes.
    package static let maximumNameLength = 64

    /// Why `name` cannot be a user name, or nil when it can: 1 to 64 bytes of ASCII letters, digits
    /// and `.`, `_`, `-`, `@` (so names print and log as they are, with nothing to escape).
    package static func problem(withName name: String) -> String? {
        if name.isEmpty { return "a user name must not be empty" }
        if name.utf8.count > maximumNameLength { return "a user name is at most \(maximumNameLength) bytes" }
        let allowed = name.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == 0x2E || byte == 0x5F || byte == 0x2D || byte == 0x40
        }
        return allowed ? nil : "a user name takes only letters, digits, '.', '_', '-' and '@': '\(PrintableText.escaped(name, limit: 64))'"
    }

    /// The stored form.
    package var json: JSONValue {
        var fields: [String: JSONValue] = [
            "name": .string(name), "passwordHash": .string(passwordHash), "rules": .array(rules.map(\.json)),
        ]
        if !tokens.isEmpty { fields["tokens"] = .array(tokens.map(\.json)) }
        return .object(fields)
    }

    /// Parses the stored form; the message says what is wrong.
    package init(json: JSONValue) throws(UserDirectoryError) {
        guard case let .object(fields) = json else { throw UserDirectoryError("a user is an object {\"name\":…,\"passwordHash\":…,\"rules\":[…]}") }
        guard case let .string(name)? = fields["name"] else { throw UserDirectoryError("a user needs 'name', a string") }
        if let problem = UserRecord.problem(withName: name) { throw UserDirectoryError(problem) }
        guard case let .string(hash)? = fields["passwordHash"], PasswordHasher.isWellFormedHash(hash) else {
            throw UserDirectoryError("user '\(name)' needs 'passwordHash', an Argon2id hash made by `kvod user add`")
        }
        var rules: [AccessRule] = []
        switch fields["rules"] {
        case nil, .null?: break
        case let .array(items)?:
            for item in items {
                do { rules.append(try AccessRule(json: item)) } catch {
                    throw UserDirectoryError("user '\(name)': \(error.message)")
                }
            }
        default: throw UserDirectoryError("user '\(name)': 'rules' must be an array")
        }
        var tokens: [APIToken] = []
        switch fields["tokens"] {
        case nil, .null?: break
        case let .array(items)?:
            for item in items {
                do { tokens.append(try APIToken(json: item)) } catch {
                    throw UserDirectoryError("user '\(name)': \(error.message)")
                }
            }
        default: throw UserDirectoryError("user '\(name)': 'tokens' must be an array")
        }
        self.init(name: name, passwordHash: hash, rules: rules, tokens: tokens)
    }
}

/// Why a user or users file could not be read or changed. A value; any thread.
package struct UserDirectoryError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What kind of problem, for the protocol's error code.
    package enum Kind: Sendable {
        /// No such user or token (`not_found`).
        case notFound
        /// The user exists already (`exists`).
        case exists
        /// Anything else: a bad name, rule or file (`bad_request`).
        case invalid
    }

    package let message: String
    package let kind: Kind
    package init(_ message: String, kind: Kind = .invalid) {
        self.message = message
        self.kind = kind
    }
    package var description: String { message }
}
