import ArgumentParser
import KVOJSON

/// `kvoclient info <object>`: prints one line per observer of an object.
struct InfoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Print the observers of an object, one per line, by subscription id.",
        discussion: """
            Each line reads `sub=<id>  keyPath=<path>  options=<a,b>  connection=<id>` \
            (`options=-` for an observation with no options). No observers: no output.
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "The object id.")
    var object: String

    func run() async throws {
        let reply = try await connection.call("info", ["object": .string(object)])
        guard let observers = reply["observers"]?.arrayValue else {
            throw CLIError.unexpectedReply(JSONValue.object(reply).description)
        }
        for observer in observers {
            let options = (observer["options"]?.arrayValue ?? []).map(DisplayText.text)
            let fields = [
                "sub=\(Self.text(observer["sub"]))",
                "keyPath=\(Self.text(observer["keyPath"]))",
                "options=\(options.isEmpty ? "-" : options.joined(separator: ","))",
                "connection=\(Self.text(observer["connection"]))",
            ]
            Terminal.printLine(fields.joined(separator: "  "))
        }
    }

    /// A string without quotes, anything else as JSON, escaped for the terminal.
    private static func text(_ value: JSONValue?) -> String {
        guard let value else { return "-" }
        return DisplayText.text(value)
    }
}
