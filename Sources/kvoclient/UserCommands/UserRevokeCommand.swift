import ArgumentParser
import KVOCommandLine
import KVOJSON

struct UserRevokeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "revoke", abstract: "Take rules PATTERN=PERMS from a user (at once, on its open connections too).")
    @OptionGroup var connection: ConnectionOptions
    @Argument var name: String
    @Argument(help: "Rules PATTERN=PERMS.") var rules: [String]

    func run() async throws {
        let reply = try await connection.call("userRevoke", ["user": .string(name), "rules": try UserCommand.rules(rules)])
        Terminal.printLine(UserCommand.line(name: name, rules: reply["rules"]))
    }
}
