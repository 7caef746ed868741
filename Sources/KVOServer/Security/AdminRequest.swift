import KVOEngine
import KVOJSON
import KVOModel

/// A user-management operation on a running server (docs/protocol.md, "Managing users online").
/// Needs `isServerAdmin`. A value; any thread.
package enum AdminRequest: Equatable, Sendable {
    case userAdd(user: String, password: String, rules: [AccessRule], hashCost: PasswordHasher.Cost)
    case userRemove(user: String)
    case userList
    case userPasswd(user: String, password: String, hashCost: PasswordHasher.Cost)
    case userGrant(user: String, rules: [AccessRule])
    case userRevoke(user: String, rules: [AccessRule])
    case tokenCreate(user: String)
    case tokenRevoke(user: String, token: String)

    /// Decodes an admin op's fields (`OperationTable`'s administration rows) (`user`, `password`, `rules`, `hashCost`, `token`).
    static func decode(op: String, _ field: (String) -> JSONValue?) throws(KVOError) -> AdminRequest {
        func string(_ name: String) throws(KVOError) -> String {
            guard let value = field(name) else { throw KVOError(.badRequest, "missing '\(name)'") }
            guard case let .string(text) = value else { throw KVOError(.badRequest, "'\(name)' must be a string, not \(value.typeName)") }
            return text
        }
        func user() throws(KVOError) -> String {
            let name = try string("user")
            if let problem = UserRecord.problem(withName: name) { throw KVOError(.badRequest, problem) }
            return name
        }
        func password() throws(KVOError) -> String {
            let text = try string("password")
            guard !text.isEmpty else { throw KVOError(.badRequest, "'password' must not be empty") }
            guard text.utf8.count <= PasswordHasher.maximumPasswordLength else {
                throw KVOError(.badRequest, "'password' is longer than \(PasswordHasher.maximumPasswordLength) bytes")
            }
            return text
        }
        func rules(required: Bool) throws(KVOError) -> [AccessRule] {
            guard let value = field("rules"), value != .null else {
                if required { throw KVOError(.badRequest, "missing 'rules'") }
                return []
            }
            guard case let .array(items) = value, !items.isEmpty || !required else {
                throw KVOError(.badRequest, "'rules' must be a non-empty array of {\"objects\":…,\"allow\":[…]}")
            }
            var rules: [AccessRule] = []
            for item in items {
                do { rules.append(try AccessRule(json: item)) } catch { throw KVOError(.badRequest, error.message) }
            }
            return rules
        }
        func hashCost() throws(KVOError) -> PasswordHasher.Cost {
            guard let value = field("hashCost"), value != .null else { return .interactive }
            guard case let .string(text) = value, let cost = PasswordHasher.Cost(rawValue: text) else {
                throw KVOError(.badRequest, "'hashCost' must be \"interactive\", \"moderate\" or \"minimal\"")
            }
            return cost
        }
        switch op {
        case "userAdd": return .userAdd(user: try user(), password: try password(), rules: try rules(required: false), hashCost: try hashCost())
        case "userRemove": return .userRemove(user: try user())
        case "userList": return .userList
        case "userPasswd": return .userPasswd(user: try user(), password: try password(), hashCost: try hashCost())
        case "userGrant": return .userGrant(user: try user(), rules: try rules(required: true))
        case "userRevoke": return .userRevoke(user: try user(), rules: try rules(required: true))
        case "tokenCreate": return .tokenCreate(user: try user())
        case "tokenRevoke": return .tokenRevoke(user: try user(), token: try string("token"))
        default: throw KVOError(.unknownOp, "unknown op '\(op)'")
        }
    }
}
