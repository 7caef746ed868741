import ArgumentParser
import KVOCommandLine
import KVOJSON

struct UserPasswdCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "passwd", abstract: "Set a user's password (from KVOD_NEW_PASSWORD or a prompt); open connections stay open.")
    @OptionGroup var connection: ConnectionOptions
    @Argument var name: String
    @Option(help: "Argon2id cost: interactive (default), moderate, or minimal (tests only).") var hashCost: HashCostArgument = .interactive

    func run() async throws {
        let password = try UserCommand.newPassword(for: name)
        try await connection.call("userPasswd", [
            "user": .string(name), "password": .string(password), "hashCost": .string(hashCost.rawValue),
        ], timeout: 60)
        Terminal.printLine("changed the password of '\(DisplayText.plain(name))'")
    }
}
