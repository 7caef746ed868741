import ArgumentParser
import KVOCommandLine
import KVOEngine
import KVOJSON
import KVOServer
#if canImport(Glibc)
import Glibc
#endif

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
