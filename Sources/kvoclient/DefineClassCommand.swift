import ArgumentParser
import KVOJSON

/// `kvoclient define-class <file>`: sends the class definition in a JSON file; prints `defined <name>`.
struct DefineClassCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "define-class",
        abstract: "Define a class from a JSON file (`-` for standard input). Prints `defined <name>`.",
        discussion: """
            The file holds one JSON object, the class definition, sent as it is: \
            {"op":"defineClass","class":<the object>}. A file that cannot be read or does not hold a \
            JSON object is a usage error (exit 2), reported before connecting.
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: ArgumentHelp("A JSON file with the class definition, or `-` for standard input.", valueName: "file"))
    var file: String

    func run() async throws {
        let definition = try JSONFileArgument.orExit { () throws(ValidationError) in
            try JSONFileArgument.object(file, what: "class definition")
        }
        let reply = try await connection.call("defineClass", ["class": .object(definition)])
        guard let name = reply["name"]?.stringValue else { throw CLIError.unexpectedReply(JSONValue.object(reply).description) }
        Terminal.printLine("defined \(DisplayText.plain(name))")
    }
}
