import ArgumentParser
import KVOJSON

/// `kvoclient classes`: prints every class definition, one per line, as compact JSON.
struct ClassesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "classes",
        abstract: "Print every class definition, one per line, as compact JSON (keys sorted).",
        discussion: "With --json, prints the server's whole reply as one line instead. No classes: no output."
    )

    @OptionGroup var connection: ConnectionOptions

    @Flag(help: "Print the whole reply as one line of compact JSON (keys sorted).")
    var json = false

    func run() throws {
        let reply = try connection.connect().call("classes")
        guard let classes = reply["classes"]?.arrayValue else {
            throw CLIError.unexpectedReply(JSONValue.object(reply).description)
        }
        if json {
            Terminal.printLine(DisplayText.json(.object(reply)))
            return
        }
        for definition in classes {
            Terminal.printLine(DisplayText.json(definition))
        }
    }
}
