import ArgumentParser
import KVOJSON

/// `kvoclient signal <object> <json>`: sends a payload to the object's observers (docs/protocol.md, "Signals");
/// prints `sent`.
struct SignalCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "signal",
        abstract: "Send a payload to an object's observers (reason `signal`); nothing is stored. Prints `sent`."
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "The object id.")
    var object: String

    /// Captures unrecognized input so that a negative number (`-1.5`) is a payload, not an option.
    @Argument(
        parsing: .allUnrecognized,
        help: ArgumentHelp(
            "The payload: JSON when it parses as JSON, otherwise a plain string (one argument).",
            valueName: "json"))
    var values: [String] = []

    /// The payload argument, after an optional `--` terminator.
    private var payload: String? {
        let given = ValueArgument.droppingTerminator(values)
        return given.count == 1 ? given[0] : nil
    }

    func validate() throws {
        if let payload {
            _ = try ValueArgument.parse(payload)
            return
        }
        let given = ValueArgument.droppingTerminator(values)
        if given.isEmpty { throw ValidationError("Missing expected argument '<json>'") }
        throw ValidationError(
            "expected one payload, got \(given.count) (\(given.joined(separator: " "))): quote a payload that contains spaces")
    }

    func run() async throws {
        let value = try ValueArgument.parse(payload ?? "")
        try await connection.withClient { kvod in try await kvod.signal(object, value) }
        print("sent")
    }
}
