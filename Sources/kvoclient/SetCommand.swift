import ArgumentParser
import KVOJSON

/// `kvoclient set <object> <keyPath> <value>`: sets a value; prints `rev N`.
struct SetCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set",
        abstract: "Set the value at a key path. Prints `rev N`."
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "The object id.")
    var object: String

    @Argument(help: "A key path such as `address.city`; intermediate objects must exist.")
    var keyPath: String

    @Argument(help: "The value: JSON when it parses as JSON, otherwise a plain string.")
    var value: String

    func run() throws {
        let params: [String: JSONValue] = [
            "object": .string(object), "keyPath": .string(keyPath), "value": ValueArgument.parse(value),
        ]
        let reply = try connection.connect().call("set", params)
        try RevisionLine.print(reply)
    }
}
