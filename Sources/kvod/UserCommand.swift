import ArgumentParser
import KVOCommandLine
import KVOJSON
import KVOServer
#if canImport(Glibc)
import Glibc
#endif

/// `kvod user …`: offline user management on a stopped server (docs/protocol.md, "Users"). Each
/// subcommand reads the users (from `--users FILE` or the store under `--data DIR`), changes them and
/// writes them back. Passwords come from KVOD_PASSWORD or a prompt on a terminal, never from argv.
struct UserCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kvod user",
        abstract: "Manage kvod's users on a stopped server (a running one: kvoclient user …).",
        subcommands: [UserAdd.self, UserRemove.self, UserList.self, UserPasswd.self, UserGrant.self, UserRevoke.self,
                      UserToken.self])
}

/// Where the users live: the store under `--data DIR` (kvod's default data directory when neither
/// flag is given), or `--users FILE` (for `kvod --in-memory --users FILE`).
struct UserSource: ParsableArguments {
    @Option(help: ArgumentHelp("Data directory of a stopped kvod (default: \(KVOD.defaultDataDirectory)).", valueName: "directory"))
    var data: String?

    @Option(help: ArgumentHelp("The users file of `kvod --in-memory --users FILE` instead (created if missing).", valueName: "file"))
    var users: String?

    func validate() throws {
        if let data, let users {
            throw ValidationError("--data '\(data)' and --users '\(users)' cannot be used together")
        }
    }

    /// Reads the users, lets `change` alter them, and writes back what changed when it returns true.
    /// With `--data`, the store is opened as kvod opens it (locked for this process): with a kvod
    /// running on the same directory this fails, saying so, and changes nothing.
    func update(_ change: (UserDirectory) throws -> Bool) throws {
        if let path = users {
            let directory = try UsersFile.load(path, missingIsEmpty: true)
            if try change(directory) { try UsersFile.save(directory, to: path) }
            return
        }
        let store = try openStore()
        defer { store.close() }
        let directory = try store.loadUsers()
        let before = directory.users
        guard try change(directory) else { return }
        let after = directory.users
        let remaining = Set(after.map(\.name))
        try store.writeUsers(upserting: after.filter { !before.contains($0) },
                             deleting: before.map(\.name).filter { !remaining.contains($0) })
    }

    func read() throws -> UserDirectory {
        if let path = users { return try UsersFile.load(path, missingIsEmpty: true) }
        let store = try openStore()
        defer { store.close() }
        return try store.loadUsers()
    }

    /// The store, synced fully (user changes are rare), with no history trimming (the limits are the
    /// server's business).
    private func openStore() throws -> PersistentStore {
        let directory = data ?? KVOD.defaultDataDirectory
        do {
            return try PersistentStore(directory: directory, sync: .full, historyLimit: .max, historyByteLimit: .max)
        } catch .locked {
            throw UserCommandError("""
                the data directory '\(directory)' is in use by a running kvod: stop it first, or change users \
                online with `kvoclient user …`
                """)
        } catch {
            throw UserCommandError("\(error)")
        }
    }
}

/// Argon2id cost of a new hash (`--hash-cost`).
extension PasswordHasher.Cost: ExpressibleByArgument {}

/// Reads a new password: KVOD_PASSWORD, or asked twice on a terminal.
func readNewPassword(for name: String) throws -> String {
    do {
        return try SecretInput.read(environmentVariable: "KVOD_PASSWORD", prompt: "Password for \(name): ", confirm: true)
    } catch {
        throw ValidationError("no password: \(error)")
    }
}

/// Parses `PATTERN=PERMS` words.
func parseRules(_ words: [String]) throws -> [AccessRule] {
    var rules: [AccessRule] = []
    for word in words {
        do { rules.append(try AccessRule(argument: word)) } catch {
            throw ValidationError("'\(PrintableText.escaped(word, limit: 200))': \(error.message)")
        }
    }
    return rules
}

/// `sensor-*=read,write`.
func ruleText(_ rule: AccessRule) -> String { "\(rule.objects.text)=\(rule.allow.description)" }

struct UserAdd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add", abstract: "Add a user; the password comes from KVOD_PASSWORD or a prompt.")

    @OptionGroup var source: UserSource
    @Argument(help: "User name: letters, digits, '.', '_', '-', '@'; at most 64 bytes.") var name: String
    @Argument(help: "Rules PATTERN=PERMS, e.g. 'sensor-*=read,write' or '*=read,write,admin' (a server admin).")
    var rules: [String] = []
    @Option(help: "Argon2id cost: interactive (default), moderate, or minimal (tests only: no protection against offline guessing).")
    var hashCost: PasswordHasher.Cost = .interactive

    func run() throws {
        if let problem = UserRecord.problem(withName: name) { throw ValidationError(problem) }
        let rules = try parseRules(rules)
        try source.update { users in
            if users.user(named: name) != nil { throw UserCommandError("user '\(name)' exists already") }
            let hash = try PasswordHasher.hash(try readNewPassword(for: name), cost: hashCost)
            try users.add(UserRecord(name: name, passwordHash: hash, rules: rules))
            return true
        }
        print("added user '\(name)'")
    }
}

struct UserRemove: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove a user.")
    @OptionGroup var source: UserSource
    @Argument var name: String

    func run() throws {
        try source.update { users in
            try users.remove(name)
            return true
        }
        print("removed user '\(PrintableText.escaped(name, limit: 64))'")
    }
}

struct UserList: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List users and their rules (never hashes).")
    @OptionGroup var source: UserSource

    func run() throws {
        for user in try source.read().users {
            print(([user.name] + user.rules.map(ruleText)).joined(separator: " "))
        }
    }
}

struct UserPasswd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "passwd", abstract: "Set a user's password (from KVOD_PASSWORD or a prompt).")
    @OptionGroup var source: UserSource
    @Argument var name: String
    @Option(help: "Argon2id cost: interactive (default), moderate, or minimal (tests only).")
    var hashCost: PasswordHasher.Cost = .interactive

    func run() throws {
        try source.update { users in
            guard users.user(named: name) != nil else { throw UserCommandError("no user '\(PrintableText.escaped(name, limit: 64))'") }
            try users.setPasswordHash(try PasswordHasher.hash(try readNewPassword(for: name), cost: hashCost), of: name)
            return true
        }
        print("changed the password of '\(name)'")
    }
}

struct UserGrant: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "grant", abstract: "Give a user rules PATTERN=PERMS.")
    @OptionGroup var source: UserSource
    @Argument var name: String
    @Argument(help: "Rules PATTERN=PERMS (permissions read, write, admin).") var rules: [String]

    func run() throws {
        let rules = try parseRules(rules)
        guard !rules.isEmpty else { throw ValidationError("give at least one rule PATTERN=PERMS") }
        var now: [AccessRule] = []
        try source.update { users in
            try users.grant(rules, to: name)
            now = users.user(named: name)?.rules ?? []
            return true
        }
        print(([name] + now.map(ruleText)).joined(separator: " "))
    }
}

struct UserRevoke: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "revoke", abstract: "Take rules PATTERN=PERMS from a user.")
    @OptionGroup var source: UserSource
    @Argument var name: String
    @Argument(help: "Rules PATTERN=PERMS: the permissions are taken from the user's rule with the same pattern.") var rules: [String]

    func run() throws {
        let rules = try parseRules(rules)
        guard !rules.isEmpty else { throw ValidationError("give at least one rule PATTERN=PERMS") }
        var now: [AccessRule] = []
        try source.update { users in
            try users.revoke(rules, from: name)
            now = users.user(named: name)?.rules ?? []
            return true
        }
        print(([name] + now.map(ruleText)).joined(separator: " "))
    }
}

/// `kvod user token add|list|revoke`: API tokens for services.
struct UserToken: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token", abstract: "Manage a user's API tokens (for services: kvoclient --token, auth with token).",
        subcommands: [UserTokenAdd.self, UserTokenList.self, UserTokenRevoke.self])
}

struct UserTokenAdd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add", abstract: "Make a new API token for a user and print it (once: only its hash is kept).")
    @OptionGroup var source: UserSource
    @Argument var name: String

    func run() throws {
        var made: (text: String, id: String)?
        try source.update { users in
            made = try users.createToken(for: name)
            return true
        }
        print(made!.text)
        FileHandleStandardError.write("token '\(made!.id)' for '\(name)': shown once, store it now\n")
    }
}

struct UserTokenList: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List a user's token ids (never the tokens).")
    @OptionGroup var source: UserSource
    @Argument var name: String

    func run() throws {
        guard let user = try source.read().user(named: name) else {
            throw UserCommandError("no user '\(PrintableText.escaped(name, limit: 64))'")
        }
        for token in user.tokens { print(token.id) }
    }
}

struct UserTokenRevoke: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "revoke", abstract: "Revoke a user's token by id.")
    @OptionGroup var source: UserSource
    @Argument var name: String
    @Argument(help: "The token id (the 12 hex digits after kvod_, as `token list` shows).") var id: String

    func run() throws {
        try source.update { users in
            try users.revokeToken(id, of: name)
            return true
        }
        print("revoked token '\(PrintableText.escaped(id, limit: 64))' of '\(name)'")
    }
}

/// Writes to standard error (a note beside output meant for scripts).
enum FileHandleStandardError {
    static func write(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(2, $0.baseAddress, $0.count) }
    }
}

/// A `kvod user` failure: printed as "Error: <message>", exit status 1.
struct UserCommandError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
