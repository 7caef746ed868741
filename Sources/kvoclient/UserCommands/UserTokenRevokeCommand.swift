import ArgumentParser
import KVOCommandLine
import KVOJSON

struct UserTokenRevokeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "revoke", abstract: "Revoke an API token by id.")
    @OptionGroup var connection: ConnectionOptions
    @Argument var name: String
    @Argument(help: "The token id (12 hex digits).") var id: String

    func run() async throws {
        try await connection.call("tokenRevoke", ["user": .string(name), "token": .string(id)])
        Terminal.printLine("revoked token '\(DisplayText.plain(id))' of '\(DisplayText.plain(name))'")
    }
}
