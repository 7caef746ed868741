import ArgumentParser
import KVOCommandLine
import KVOJSON
import KVOServer
#if canImport(Glibc)
import Glibc
#endif

struct UserList: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List users and their rules (never hashes).")
    @OptionGroup var source: UserSource

    func run() throws {
        for user in try source.read().users {
            print(([user.name] + user.rules.map(ruleText)).joined(separator: " "))
        }
    }
}
