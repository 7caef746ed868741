import ArgumentParser
import KVOJSON

/// `kvoclient batch <file>`: sends the writes in a JSON file as one `batch`; prints each part's result that
/// has one (`part 2 value 35` for an `increment`), then `rev N`.
struct BatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "batch",
        abstract: "Apply the writes in a JSON file (`-` for standard input) all or nothing, with one revision. Prints `rev N`.",
        discussion: """
            The file holds a JSON array of requests, each as it would be sent alone without an `id`: \
            [{"op":"set","object":"a","keyPath":"n","value":1},{"op":"delete","object":"b","ifExists":true}]. \
            Every part applies or none does; observers see the batch as one change. A refused part refuses the \
            batch: the error names the part (`part 1 (delete): …`) and exit status is 1. A file that cannot \
            be read or does not hold a JSON array is a usage error (exit 2), reported before connecting.
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: ArgumentHelp("A JSON file with an array of writes, or `-` for standard input.", valueName: "file"))
    var file: String

    func run() async throws {
        let parts = try JSONFileArgument.orExit { () throws(ValidationError) in try JSONFileArgument.array(file, what: "batch") }
        let reply = try await connection.call("batch", ["ops": .array(parts)])
        if case let .array(results)? = reply["results"] {
            for (index, result) in results.enumerated() {
                for (name, value) in (result.objectValue ?? [:]).sorted(by: { $0.key < $1.key }) {
                    Terminal.printLine("part \(index) \(DisplayText.plain(name)) \(DisplayText.json(value))")
                }
            }
        }
        try RevisionLine.print(reply)
    }
}
