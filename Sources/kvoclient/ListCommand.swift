import ArgumentParser
import KVOJSON

/// `kvoclient list`: prints the ids of all objects, one per line, sorted.
struct ListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "Print the ids of all objects, one per line, sorted."
    )

    @OptionGroup var connection: ConnectionOptions

    func run() throws {
        let reply = try connection.connect().call("list")
        guard let objects = reply["objects"]?.arrayValue else {
            throw CLIError.unexpectedReply(JSONValue.object(reply).description)
        }
        for object in objects {
            Terminal.printLine(DisplayText.text(object))
        }
    }
}
