import ArgumentParser

/// `kvoclient ping`: checks that kvod answers; prints `pong`.
struct PingCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ping",
        abstract: "Check that the server answers. Prints `pong`."
    )

    @OptionGroup var connection: ConnectionOptions

    func run() throws {
        try connection.connect().call("ping")
        Terminal.printLine("pong")
    }
}
