import ArgumentParser
import KVOJSON

/// `kvoclient classes`: prints every class definition, one per line, as compact JSON.
struct ClassesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "classes",
        abstract: "Print every class definition, one per line, as compact JSON (keys sorted).",
        discussion: "With --json, prints the server's whole reply as one line instead. No classes: no output."
    )

    @OptionGroup var connection: ConnectionOptions

    @Flag(help: "Print the whole reply as one line of compact JSON (keys sorted).")
    var json = false

    func run() async throws {
        let reply = try await connection.call("classes")
        guard let classes = reply["classes"]?.arrayValue else {
            throw CLIError.unexpectedReply(JSONValue.object(reply).description)
        }
        if json {
            // The reply as the server sent it, but for its `id` (the client library's own numbering).
            var whole = reply
            whole["ok"] = true
            Terminal.printLine(DisplayText.json(.object(whole)))
            return
        }
        for definition in classes {
            Terminal.printLine(DisplayText.json(definition))
        }
    }
}
