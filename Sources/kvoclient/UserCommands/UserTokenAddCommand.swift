import ArgumentParser
import KVOCommandLine
import KVOJSON

struct UserTokenAddCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "add", abstract: "Create an API token and print it (shown once).")
    @OptionGroup var connection: ConnectionOptions
    @Argument var name: String

    func run() async throws {
        let reply = try await connection.call("tokenCreate", ["user": .string(name)])
        guard let token = reply["token"]?.stringValue else { throw CLIError.unexpectedReply("\(JSONValue.object(reply))") }
        Terminal.printLine(token)
    }
}
