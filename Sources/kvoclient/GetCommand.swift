import ArgumentParser
import KVOJSON

/// `kvoclient get <object> [keyPath]`: prints the object, or the value at a key path, as JSON.
struct GetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Print an object, or the value at a key path, as compact JSON (null for a missing key)."
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "The object id.")
    var object: String

    @Argument(help: "A key path such as `address.city`; without it, the whole object.")
    var keyPath: String?

    func run() async throws {
        let value = try await connection.withClient { kvod in
            if let keyPath { try await kvod.get(keyPath, of: object) } else { try await kvod.get(object) }
        }
        Terminal.printLine(DisplayText.json(value))
    }
}
