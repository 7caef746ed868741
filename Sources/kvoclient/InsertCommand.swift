import ArgumentParser
import KVOCommandLine
import KVOJSON

/// `kvoclient insert <object> <keyPath> <value>... [--index I | --indexes I,J,...]`: inserts
/// elements into an array (NSMutableArray's `insertObjects:atIndexes:`); prints `rev N`.
struct InsertCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "insert",
        abstract: "Insert values into an array: appended, from --index on, or at --indexes. Prints `rev N`.",
        discussion: """
            `insert todo items milk eggs` appends two strings; `--index 0` puts them first; \
            `--indexes 0,2` names their positions in the resulting array. Observers of the array get \
            an insertion (kind 2) with the indexes.
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @OptionGroup var conditions: ConditionOptions

    @Argument(help: "The object id.")
    var object: String

    @Argument(help: "The key path of an array, such as `items`.")
    var keyPath: String

    /// Captures unrecognized input so that a negative number (`-1.5`) is a value, not an option.
    @Argument(
        parsing: .allUnrecognized,
        help: ArgumentHelp("The values: each JSON when it parses as JSON, otherwise a plain string.", valueName: "value"))
    var values: [String] = []

    @Option(parsing: .unconditional, help: "Insert the values one after another from this index.",
            transform: NumberArgument.nonNegative)
    var index: Int?

    @Option(parsing: .unconditional, help: "Comma-separated positions of the values in the resulting array, one per value.")
    var indexes: String?

    func validate() throws {
        try conditions.validate(keyPath: keyPath)
        if ValueArgument.droppingTerminator(values).isEmpty {
            throw ValidationError("Missing expected argument '<value>'")
        }
        if index != nil, indexes != nil { throw ValidationError("give --index or --indexes, not both") }
        for value in ValueArgument.droppingTerminator(values) { _ = try ValueArgument.parse(value) }
        if let indexes { _ = try IndexList.parse(indexes) }
    }

    func run() async throws {
        let elements = try ValueArgument.droppingTerminator(values).map { value throws(ValidationError) in try ValueArgument.parse(value) }
        let positions = try indexes.map { text in try IndexList.parse(text).map { Int($0) } }
        RevisionLine.print(try await connection.withClient { kvod in
            try await kvod.insert(keyPath, of: object, values: elements, at: index, indexes: positions,
                                  if: try conditions.conditions(keyPath: keyPath))
        })
    }
}
