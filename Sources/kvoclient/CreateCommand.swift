import ArgumentParser
import KVOJSON

/// `kvoclient create <object> [values-json]`: creates an object; prints `rev N`.
struct CreateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create",
        abstract: "Create an object, optionally with initial values (a JSON object). Prints `rev N`."
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "The object id.")
    var object: String

    @Argument(help: "The initial values, a JSON object such as '{\"date\":\"2026-11-20\"}'.")
    var values: String?

    func validate() throws {
        if let values, (try? JSONParser.parse(values))?.objectValue == nil {
            throw ValidationError("values must be a JSON object, such as '{\"date\":\"2026-11-20\"}'")
        }
    }

    func run() throws {
        var params: [String: JSONValue] = ["object": .string(object)]
        if let values { params["values"] = try JSONParser.parse(values) }
        let reply = try connection.connect().call("create", params)
        try RevisionLine.print(reply)
    }
}
