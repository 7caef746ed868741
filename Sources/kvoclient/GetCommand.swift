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
        var params: [String: JSONValue] = ["object": .string(object)]
        if let keyPath { params["keyPath"] = .string(keyPath) }
        let reply = try await connection.call("get", params)
        guard let value = reply["value"] else { throw CLIError.unexpectedReply(JSONValue.object(reply).description) }
        Terminal.printLine(DisplayText.json(value))
    }
}
