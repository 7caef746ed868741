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

/// Argon2id cost of a new hash (`--hash-cost`).
enum HashCostArgument: String, ExpressibleByArgument {
    case interactive, moderate, minimal
}

struct UserAddCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "add", abstract: "Add a user (password from KVOD_NEW_PASSWORD or a prompt).")
    @OptionGroup var connection: ConnectionOptions
    @Argument var name: String
    @Argument(help: "Rules PATTERN=PERMS, e.g. 'sensor-*=read,write'.") var rules: [String] = []
    @Option(help: "Argon2id cost: interactive (default), moderate, or minimal (tests only).") var hashCost: HashCostArgument = .interactive

    func run() throws {
        let rules = try UserCommand.rules(rules)
        let password = try UserCommand.newPassword(for: name)
        try connection.connect().call("userAdd", [
            "user": .string(name), "password": .string(password), "rules": rules, "hashCost": .string(hashCost.rawValue),
        ], timeout: 60)
        Terminal.printLine("added user '\(DisplayText.plain(name))'")
    }
}

struct UserRemoveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove a user; its open connections are closed.")
    @OptionGroup var connection: ConnectionOptions
    @Argument var name: String

    func run() throws {
        let reply = try connection.connect().call("userRemove", ["user": .string(name)])
        let closed = reply["closedConnections"]?.intValue ?? 0
        Terminal.printLine("removed user '\(DisplayText.plain(name))' (\(closed) connection\(closed == 1 ? "" : "s") closed)")
    }
}

struct UserListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List users and their rules.")
    @OptionGroup var connection: ConnectionOptions

    func run() throws {
        let reply = try connection.connect().call("userList")
        for user in reply["users"]?.arrayValue ?? [] {
            Terminal.printLine(UserCommand.line(name: user["name"]?.stringValue ?? "?", rules: user["rules"]))
        }
    }
}

struct UserPasswdCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "passwd", abstract: "Set a user's password (from KVOD_NEW_PASSWORD or a prompt); open connections stay open.")
    @OptionGroup var connection: ConnectionOptions
    @Argument var name: String
    @Option(help: "Argon2id cost: interactive (default), moderate, or minimal (tests only).") var hashCost: HashCostArgument = .interactive

    func run() throws {
        let password = try UserCommand.newPassword(for: name)
        try connection.connect().call("userPasswd", [
            "user": .string(name), "password": .string(password), "hashCost": .string(hashCost.rawValue),
        ], timeout: 60)
        Terminal.printLine("changed the password of '\(DisplayText.plain(name))'")
    }
}

struct UserGrantCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "grant", abstract: "Give a user rules PATTERN=PERMS (at once, on its open connections too).")
    @OptionGroup var connection: ConnectionOptions
    @Argument var name: String
    @Argument(help: "Rules PATTERN=PERMS.") var rules: [String]

    func run() throws {
        let reply = try connection.connect().call("userGrant", ["user": .string(name), "rules": try UserCommand.rules(rules)])
        Terminal.printLine(UserCommand.line(name: name, rules: reply["rules"]))
    }
}

struct UserRevokeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "revoke", abstract: "Take rules PATTERN=PERMS from a user (at once, on its open connections too).")
    @OptionGroup var connection: ConnectionOptions
    @Argument var name: String
    @Argument(help: "Rules PATTERN=PERMS.") var rules: [String]

    func run() throws {
        let reply = try connection.connect().call("userRevoke", ["user": .string(name), "rules": try UserCommand.rules(rules)])
        Terminal.printLine(UserCommand.line(name: name, rules: reply["rules"]))
    }
}

struct UserTokenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token", abstract: "Create or revoke a user's API tokens.", subcommands: [UserTokenAddCommand.self, UserTokenRevokeCommand.self])
}

struct UserTokenAddCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "add", abstract: "Create an API token and print it (shown once).")
    @OptionGroup var connection: ConnectionOptions
    @Argument var name: String

    func run() throws {
        let reply = try connection.connect().call("tokenCreate", ["user": .string(name)])
        guard let token = reply["token"]?.stringValue else { throw CLIError.unexpectedReply("\(JSONValue.object(reply))") }
        Terminal.printLine(token)
    }
}

struct UserTokenRevokeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "revoke", abstract: "Revoke an API token by id.")
    @OptionGroup var connection: ConnectionOptions
    @Argument var name: String
    @Argument(help: "The token id (12 hex digits).") var id: String

    func run() throws {
        try connection.connect().call("tokenRevoke", ["user": .string(name), "token": .string(id)])
        Terminal.printLine("revoked token '\(DisplayText.plain(id))' of '\(DisplayText.plain(name))'")
    }
}
