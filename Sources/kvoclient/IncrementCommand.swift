import ArgumentParser
import KVOJSON

/// `kvoclient increment <object> <keyPath> [by]`: adds to a number atomically; prints the new value, then `rev N`.
struct IncrementCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "increment",
        abstract: "Add to the number at a key path (missing or null counts as 0). Prints the new value, then `rev N`."
    )

    @OptionGroup var connection: ConnectionOptions

    @OptionGroup var conditions: ConditionOptions

    @Argument(help: "The object id.")
    var object: String

    @Argument(help: "A key path such as `stats.visits`.")
    var keyPath: String

    /// Captures unrecognized input so that a negative step (`-2`) is a value, not an option.
    @Argument(parsing: .allUnrecognized, help: ArgumentHelp("The step, an integer or a number (default 1).", valueName: "by"))
    var steps: [String] = []

    /// The step, after an optional `--` terminator; nil when not given.
    private func step() throws -> JSONValue? {
        let given = ValueArgument.droppingTerminator(steps)
        guard !given.isEmpty else { return nil }
        guard given.count == 1 else { throw ValidationError("expected at most one step, got \(given.count) (\(given.joined(separator: " ")))") }
        let value = try ValueArgument.parse(given[0])
        switch value {
        case .int, .double: return value
        default: throw ValidationError("the step must be a number, not '\(given[0])'")
        }
    }

    func validate() throws {
        try conditions.validate(keyPath: keyPath)
        _ = try step()
    }

    func run() async throws {
        let step = try step()
        let conditions = try conditions.conditions(keyPath: keyPath)
        let (value, rev) = try await connection.withClient { kvod in
            switch step {
            case let .double(by)?: try await kvod.increment(keyPath, of: object, by: by, if: conditions)
            default: try await kvod.increment(keyPath, of: object, by: step?.intValue ?? 1, if: conditions)
            }
        }
        Terminal.printLine(DisplayText.json(value))
        RevisionLine.print(rev)
    }
}
