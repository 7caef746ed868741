import ArgumentParser
import KVOJSON

/// `kvoclient config`: every setting in force and where it came from (the `config` operation, server admins).
struct ConfigCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config",
        abstract: "Show every setting kvod runs with and where it came from (default, file, environment, flag, reload).",
        discussion: """
            Server admins only. One setting a line: name, value, source (and the file line or variable). A setting \
            a reload could not change says what the next start takes. Secrets are never shown. With --json, prints \
            the server's whole reply as one line instead.
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Flag(help: "Print the whole reply as one line of compact JSON (keys sorted).")
    var json = false

    func run() async throws {
        let reply = try await connection.call("config")
        if json { return ReplyLine.print(reply) }
        let settings = reply["settings"]?.arrayValue ?? []
        let width = settings.compactMap { $0["name"]?.stringValue?.count }.max() ?? 0
        for setting in settings {
            Terminal.printLine(DisplayText.plain(ConfigCommand.line(setting, width: width)))
        }
    }

    /// `max-connections  500  (reload: kvod.conf line 2)`.
    static func line(_ setting: JSONValue, width: Int) -> String {
        var text = (setting["name"]?.stringValue ?? "?").padding(width + 1) + " " + shown(setting["value"])
        let source = setting["source"]?.stringValue ?? "?"
        text += "  (\(source)" + (setting["origin"]?.stringValue.map { ": \($0)" } ?? "") + ")"
        if let next = setting["afterRestart"] { text += "  after a restart: \(shown(next))" }
        return text
    }

    private static func shown(_ value: JSONValue?) -> String {
        switch value {
        case let .string(text)?: return text
        case let .array(values)?: return values.isEmpty ? "(none)" : values.compactMap(\.stringValue).joined(separator: ",")
        default: return "(none)"
        }
    }
}
