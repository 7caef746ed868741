import ArgumentParser

/// `kvoclient ping`: checks that kvod answers; prints `pong`.
struct PingCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ping",
        abstract: "Check that the server answers. Prints `pong`."
    )

    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        try await connection.call("ping")
        Terminal.printLine("pong")
    }
}
