import ArgumentParser
import KVOCommandLine
import KVOJSON
import KVOServer
#if canImport(Glibc)
import Glibc
#endif

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
