import ArgumentParser
import KVOCommandLine
import KVOJSON
import KVOServer
#if canImport(Glibc)
import Glibc
#endif

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
