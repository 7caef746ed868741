import ArgumentParser
import KVOCommandLine
import KVOJSON

/// `kvoclient list`: prints the ids of all objects, one per line, sorted; pages through them
/// (`list` with `limit` and `after`), so it works for any number of objects.
struct ListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "Print the ids of all objects, one per line, sorted.",
        discussion: """
            The ids are fetched in pages of --page-size, so any number of objects can be listed. \
            --after ID starts after that id (it need not exist); --limit N prints at most N ids. To \
            continue a listing cut by --limit, pass the last id printed as --after.
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Option(parsing: .unconditional, help: "Print at most this many ids.", transform: NumberArgument.positive)
    var limit: Int?

    @Option(parsing: .unconditional, help: "Start after this id (ids sort by Unicode order).")
    var after: String?

    @Option(parsing: .unconditional, help: "Ids asked for per request.", transform: NumberArgument.positive)
    var pageSize = 1000

    func run() async throws {
        let client = try await connection.connect()
        defer { client.close() }
        var cursor = after
        var remaining = limit ?? Int.max
        while remaining > 0 {
            var params: [String: JSONValue] = ["limit": .int(Int64(min(pageSize, remaining)))]
            if let cursor { params["after"] = .string(cursor) }
            let reply = try await ConnectionOptions.call(on: client, "list", params)
            guard let objects = reply["objects"]?.arrayValue, let more = reply["more"]?.boolValue else {
                throw CLIError.unexpectedReply(JSONValue.object(reply).description)
            }
            for object in objects {
                Terminal.printLine(DisplayText.text(object))
            }
            remaining -= objects.count
            guard more, let last = objects.last?.stringValue else { return }
            cursor = last
        }
    }
}
