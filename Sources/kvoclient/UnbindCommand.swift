import ArgumentParser
import KVOJSON

/// `kvoclient unbind <id>`: removes a binding; prints `removed`, or `not bound` when there was none.
struct UnbindCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unbind",
        abstract: "Remove a binding by id. Prints `removed`, or `not bound` when no binding has that id.",
        discussion: "Both exit 0: unbinding twice is safe."
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: ArgumentHelp("The binding id that `bind` or `combine` printed.", valueName: "id"))
    var binding: UInt64

    func run() throws {
        let reply = try connection.connect().call("unbind", ["binding": .int(Int64(bitPattern: binding))])
        guard let removed = reply["removed"]?.boolValue else {
            throw CLIError.unexpectedReply(JSONValue.object(reply).description)
        }
        Terminal.printLine(removed ? "removed" : "not bound")
    }
}
