import ArgumentParser
import KVOJSON

/// `kvoclient set <object> <keyPath> <value>`: sets a value; prints `rev N`.
struct SetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set",
        abstract: "Set the value at a key path. Prints `rev N`."
    )

    @OptionGroup var connection: ConnectionOptions

    @OptionGroup var conditions: ConditionOptions

    @OptionGroup var ttl: TTLOption

    @Argument(help: "The object id.")
    var object: String

    @Argument(help: "A key path such as `address.city`; intermediate objects must exist.")
    var keyPath: String

    /// Captures unrecognized input so that a negative number (`-1.5`) is a value, not an option.
    @Argument(
        parsing: .allUnrecognized,
        help: ArgumentHelp(
            "The value: JSON when it parses as JSON, otherwise a plain string (one argument).",
            valueName: "value"))
    var values: [String] = []

    /// The value argument, after an optional `--` terminator.
    private var value: String? {
        let given = ValueArgument.droppingTerminator(values)
        return given.count == 1 ? given[0] : nil
    }

    func validate() throws {
        try conditions.validate(keyPath: keyPath)
        if let value {
            _ = try ValueArgument.parse(value)
            return
        }
        let given = ValueArgument.droppingTerminator(values)
        if given.isEmpty { throw ValidationError("Missing expected argument '<value>'") }
        throw ValidationError(
            "expected one value, got \(given.count) (\(given.joined(separator: " "))): quote a value that contains spaces")
    }

    func run() async throws {
        let value = try ValueArgument.parse(value ?? "")
        RevisionLine.print(try await connection.withClient { kvod in try await kvod.set(keyPath, of: object, to: value, ttl: ttl.duration,
                                                                                    if: try conditions.conditions(keyPath: keyPath)) })
    }
}
