import ArgumentParser
import KVOCommandLine
import KVOEngine
import KVOJSON
import KVOServer
#if canImport(Glibc)
import Glibc
#endif

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
