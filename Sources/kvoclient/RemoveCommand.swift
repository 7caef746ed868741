import ArgumentParser
import KVOJSON

/// `kvoclient remove <object> <keyPath> <index>...`: removes elements from an array at the given
/// indexes of the current array; prints `rev N`.
struct RemoveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove",
        abstract: "Remove the elements at the given indexes of an array. Prints `rev N`.",
        discussion: "Observers of the array get a removal (kind 3) with the indexes and, if asked, the removed values."
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "The object id.")
    var object: String

    @Argument(help: "The key path of an array, such as `items`.")
    var keyPath: String

    @Argument(help: "Indexes in the current array.")
    var indexes: [Int]

    func validate() throws {
        guard !indexes.isEmpty else { throw ValidationError("Missing expected argument '<indexes>'") }
    }

    func run() throws {
        let params: [String: JSONValue] = [
            "object": .string(object), "keyPath": .string(keyPath),
            "indexes": .array(indexes.map { .int(Int64($0)) }),
        ]
        let reply = try connection.connect().call("remove", params)
        try RevisionLine.print(reply)
    }
}
