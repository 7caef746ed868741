import ArgumentParser
import KVOCommandLine
import KVOJSON

/// `kvoclient remove <object> <keyPath> <index>...`: removes elements from an array at the given
/// indexes of the current array; prints `rev N`.
struct RemoveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove",
        abstract: "Remove the elements at the given indexes of an array. Prints `rev N`.",
        discussion: "Observers of the array get a removal (kind 3) with the indexes and, if asked, the removed values."
    )

    @OptionGroup var connection: ConnectionOptions

    @OptionGroup var conditions: ConditionOptions

    @Argument(help: "The object id.")
    var object: String

    @Argument(help: "The key path of an array, such as `items`.")
    var keyPath: String

    /// Captured as `allUnrecognized` words, so that `-1` reaches `NumberArgument` ("must be 0 or
    /// more") instead of being taken for an option.
    @Argument(parsing: .allUnrecognized, help: ArgumentHelp("Indexes in the current array.", valueName: "indexes"))
    var indexes: [String] = []

    /// The parsed indexes.
    private var parsedIndexes: [Int64] {
        get throws(NumberArgument.Invalid) {
            try ValueArgument.droppingTerminator(indexes).map(NumberArgument.index)
        }
    }

    func validate() throws {
        try conditions.validate(keyPath: keyPath)
        guard !ValueArgument.droppingTerminator(indexes).isEmpty else {
            throw ValidationError("Missing expected argument '<indexes>'")
        }
        do { _ = try parsedIndexes } catch { throw ValidationError(error.description) }
    }

    func run() async throws {
        let positions = try parsedIndexes.map { Int($0) }
        RevisionLine.print(try await connection.withClient { kvod in try await kvod.remove(keyPath, of: object, indexes: positions, if: try conditions.conditions(keyPath: keyPath))
        })
    }
}
