import ArgumentParser
import KVOCommandLine
import KVOJSON

struct UserListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List users and their rules.")
    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        let reply = try await connection.call("userList")
        for user in reply["users"]?.arrayValue ?? [] {
            Terminal.printLine(UserCommand.line(name: user["name"]?.stringValue ?? "?", rules: user["rules"]))
        }
    }
}
