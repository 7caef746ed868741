import ArgumentParser
import KVOCommandLine
import KVOJSON

struct UserAddCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "add", abstract: "Add a user (password from KVOD_NEW_PASSWORD or a prompt).")
    @OptionGroup var connection: ConnectionOptions
    @Argument var name: String
    @Argument(help: "Rules PATTERN=PERMS, e.g. 'sensor-*=read,write'.") var rules: [String] = []
    @Option(help: "Argon2id cost: interactive (default), moderate, or minimal (tests only).") var hashCost: HashCostArgument = .interactive

    func run() async throws {
        let rules = try UserCommand.rules(rules)
        let password = try UserCommand.newPassword(for: name)
        try await connection.call("userAdd", [
            "user": .string(name), "password": .string(password), "rules": rules, "hashCost": .string(hashCost.rawValue),
        ], timeout: 60)
        Terminal.printLine("added user '\(DisplayText.plain(name))'")
    }
}
