import ArgumentParser
import KVOCommandLine
import KVOJSON

struct UserRemoveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove a user; its open connections are closed.")
    @OptionGroup var connection: ConnectionOptions
    @Argument var name: String

    func run() async throws {
        let reply = try await connection.call("userRemove", ["user": .string(name)])
        let closed = reply["closedConnections"]?.intValue ?? 0
        Terminal.printLine("removed user '\(DisplayText.plain(name))' (\(closed) connection\(closed == 1 ? "" : "s") closed)")
    }
}
