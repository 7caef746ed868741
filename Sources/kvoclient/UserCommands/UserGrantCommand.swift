import ArgumentParser
import KVOCommandLine
import KVOJSON

struct UserGrantCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "grant", abstract: "Give a user rules PATTERN=PERMS (at once, on its open connections too).")
    @OptionGroup var connection: ConnectionOptions
    @Argument var name: String
    @Argument(help: "Rules PATTERN=PERMS.") var rules: [String]

    func run() async throws {
        let reply = try await connection.call("userGrant", ["user": .string(name), "rules": try UserCommand.rules(rules)])
        Terminal.printLine(UserCommand.line(name: name, rules: reply["rules"]))
    }
}
