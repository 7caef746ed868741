import ArgumentParser
import KVOJSON

/// `kvoclient create <object> [values-json] [--class <name>]`: creates an object, optionally an instance
/// of a class; prints `rev N`.
struct CreateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create",
        abstract: "Create an object, optionally with initial values (a JSON object). Prints `rev N`.",
        discussion: "With --class, the object is created as an instance of that class (see define-class)."
    )

    @OptionGroup var connection: ConnectionOptions

    @OptionGroup var conditions: ConditionOptions

    @OptionGroup var ttl: TTLOption

    @Argument(help: "The object id.")
    var object: String

    @Argument(help: "The initial values, a JSON object such as '{\"date\":\"2026-11-20\"}'.")
    var values: String?

    @Option(name: .customLong("class"), help: ArgumentHelp("Make the object an instance of this class.", valueName: "name"))
    var className: String?

    func validate() throws {
        try conditions.validate(keyPath: nil)
        guard let values else { return }
        let parsed: JSONValue
        do {
            parsed = try JSONParser.parse(values, wideIntegers: .refused)
        } catch {
            throw ValidationError("values must be a JSON object, such as '{\"date\":\"2026-11-20\"}': '\(PrintableText.escaped(values, limit: 80))' is not valid JSON (\(error))")
        }
        if parsed.objectValue == nil {
            throw ValidationError("values must be a JSON object, such as '{\"date\":\"2026-11-20\"}'")
        }
    }

    func run() async throws {
        let values = try values.map { text throws(JSONParseError) in try JSONParser.parse(text, wideIntegers: .refused) } ?? [:]
        RevisionLine.print(try await connection.withClient { kvod in try await kvod.create(object, values: values, class: className, ttl: ttl.duration,
                                                                                       if: try conditions.conditions(keyPath: nil))
        })
    }
}
