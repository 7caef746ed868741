import ArgumentParser
import KVOCommandLine
import KVOJSON

/// `kvoclient replace <object> <keyPath> <index> <value> [<index> <value>]...`: replaces array
/// elements in place; prints `rev N`.
struct ReplaceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replace",
        abstract: "Replace array elements: pairs of an index and a new value. Prints `rev N`.",
        discussion: """
            `replace scores list 0 10 2 30` sets elements 0 and 2. Observers of the array get a \
            replacement (kind 4) with the indexes and the old and new elements.
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
        help: ArgumentHelp(
            "Pairs of an index and a value (JSON when it parses as JSON, otherwise a plain string).",
            valueName: "index value"))
    var pairs: [String] = []

    /// The (index, value) pairs, or nil when the arguments do not form pairs; throws a usage error
    /// for an index that is not a whole number, 0 or more, or a value that looks like JSON but is not.
    private var parsedPairs: [(index: Int64, value: JSONValue)]? {
        get throws(ValidationError) {
            let arguments = ValueArgument.droppingTerminator(pairs)
            guard !arguments.isEmpty, arguments.count % 2 == 0 else { return nil }
            var result: [(index: Int64, value: JSONValue)] = []
            for start in stride(from: 0, to: arguments.count, by: 2) {
                let index: Int64
                do { index = try NumberArgument.index(arguments[start]) } catch { throw ValidationError(error.description) }
                result.append((index, try ValueArgument.parse(arguments[start + 1])))
            }
            return result
        }
    }

    func validate() throws {
        try conditions.validate(keyPath: keyPath)
        guard try parsedPairs != nil else {
            throw ValidationError("expected pairs of an index and a value, such as `0 10 2 30`, not '\(pairs.joined(separator: " "))'")
        }
    }

    func run() async throws {
        let pairs = try parsedPairs ?? []
        RevisionLine.print(try await connection.withClient { kvod in
            try await kvod.replace(keyPath, of: object, indexes: pairs.map { Int($0.index) }, with: pairs.map(\.value),
                                   if: try conditions.conditions(keyPath: keyPath))
        })
    }
}
