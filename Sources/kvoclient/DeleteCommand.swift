import ArgumentParser
import KVOJSON

/// `kvoclient delete <object>`: deletes an object (its observers get `sourceDeleted`); prints `rev N`.
struct DeleteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Delete an object; its observers get a final sourceDeleted event. Prints `rev N`."
    )

    @OptionGroup var connection: ConnectionOptions

    @OptionGroup var conditions: ConditionOptions

    @Argument(help: "The object id.")
    var object: String

    func validate() throws {
        try conditions.validate(keyPath: nil)
    }

    func run() async throws {
        RevisionLine.print(try await connection.withClient { kvod in try await kvod.delete(object, if: try conditions.conditions(keyPath: nil)) })
    }
}
