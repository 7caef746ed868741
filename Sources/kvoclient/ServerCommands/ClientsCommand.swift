import ArgumentParser
import KVOJSON

/// `kvoclient clients`: prints kvod's open connections, one per line (server admins).
struct ClientsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "clients",
        abstract: "Print kvod's open connections, one per line by id (server admins).",
        discussion: """
            Each line reads `<id>  kind=<tcp|tls|unix|websocket|http>  address=<peer>  user=<name>  age=<s>  \
            idle=<s>  observations=<n>  outputBytes=<n>  session=<id>` (`user=-` in open mode or before a login, \
            `session=-` without one; idle counts from the last request, or from the connection's start). The \
            connection kvoclient itself uses is listed too, marked `(this one)`. `kvoclient kill ID` closes one.
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Flag(help: "Print each connection as one line of compact JSON (keys sorted).")
    var json = false

    func run() async throws {
        let reply = try await connection.call("clients")
        guard let clients = reply["clients"]?.arrayValue else {
            throw CLIError.unexpectedReply(JSONValue.object(reply).description)
        }
        for client in clients {
            if json {
                Terminal.printLine(DisplayText.json(client))
                continue
            }
            var fields = [
                SlowCommand.text(client["connection"]), "kind=\(SlowCommand.text(client["kind"]))",
                "address=\(SlowCommand.text(client["address"]))",
                "user=\(client["user"] == .null ? "-" : SlowCommand.text(client["user"]))",
                "age=\(Self.seconds(client["age"]))", "idle=\(Self.seconds(client["idle"]))",
                "observations=\(SlowCommand.text(client["observations"]))",
                "outputBytes=\(SlowCommand.text(client["outputBytes"]))",
                "session=\(client["session"] == .null ? "-" : SlowCommand.text(client["session"]))",
            ]
            if client["own"] == .bool(true) { fields.append("(this one)") }
            Terminal.printLine(fields.joined(separator: "  "))
        }
    }

    /// Seconds with millisecond precision, as the server sent them (`12.345`).
    private static func seconds(_ value: JSONValue?) -> String {
        guard let seconds = value?.doubleValue else { return "-" }
        return WallClockText.thousandths(Int64((seconds * 1000).rounded()))
    }
}
