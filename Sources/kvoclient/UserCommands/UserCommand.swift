import ArgumentParser
import KVOCommandLine
import KVOJSON

/// `kvoclient user …`: user management on a running kvod (the admin operations; the logged-in user
/// needs the rule `*=admin`). On a stopped server: `kvod user …`. New passwords come from
/// KVOD_NEW_PASSWORD or a prompt on a terminal (KVOD_PASSWORD is the caller's own, for `--user`).
struct UserCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "user",
        abstract: "Manage users on a running kvod (needs an admin login: --user NAME with the rule '*=admin').",
        subcommands: [UserAddCommand.self, UserRemoveCommand.self, UserListCommand.self, UserPasswdCommand.self,
                      UserGrantCommand.self, UserRevokeCommand.self, UserTokenCommand.self])

    /// `PATTERN=PERMS` words as the JSON rules the server takes (parsed there).
    static func rules(_ words: [String]) throws -> JSONValue {
        var rules: [JSONValue] = []
        for word in words {
            guard let equals = word.lastIndex(of: "=") else {
                throw ValidationError("'\(word)': a rule is PATTERN=PERMISSIONS, e.g. 'sensor-*=read,write'")
            }
            let permissions = word[word.index(after: equals)...].split(separator: ",").map { JSONValue.string(String($0)) }
            rules.append(.object(["objects": .string(String(word[..<equals])), "allow": .array(permissions)]))
        }
        return .array(rules)
    }

    /// `name rule rule …`, as `kvod user list` prints.
    static func line(name: String, rules: JSONValue?) -> String {
        let texts = (rules?.arrayValue ?? []).map { rule -> String in
            let objects = rule["objects"]?.stringValue ?? "?"
            let allow = (rule["allow"]?.arrayValue ?? []).compactMap(\.stringValue).joined(separator: ",")
            return "\(objects)=\(allow)"
        }
        return ([name] + texts).map { DisplayText.plain($0) }.joined(separator: " ")
    }

    /// The new user's password: KVOD_NEW_PASSWORD, or asked twice on a terminal.
    static func newPassword(for name: String) throws -> String {
        do {
            return try SecretInput.read(environmentVariable: "KVOD_NEW_PASSWORD", prompt: "New password for \(name): ", confirm: true)
        } catch {
            throw ValidationError("no password for '\(name)': \(error)")
        }
    }
}
