import ArgumentParser
import KVOJSON

/// `kvoclient list`: prints the ids of all objects, one per line, sorted; pages through them
/// (`list` with `limit` and `after`), so it works for any number of objects.
struct ListCommand: ParsableCommand {
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

    @Option(help: "Print at most this many ids.")
    var limit: Int?

    @Option(help: "Start after this id (ids sort by Unicode order).")
    var after: String?

    @Option(help: "Ids asked for per request.")
    var pageSize = 1000

    func validate() throws {
        if let limit, limit < 1 { throw ValidationError("--limit must be 1 or more") }
        guard pageSize >= 1 else { throw ValidationError("--page-size must be 1 or more") }
    }

    func run() throws {
        let client = try connection.connect()
        var cursor = after
        var remaining = limit ?? Int.max
        while remaining > 0 {
            var params: [String: JSONValue] = ["limit": .int(Int64(min(pageSize, remaining)))]
            if let cursor { params["after"] = .string(cursor) }
            let reply = try client.call("list", params)
            guard let objects = reply["objects"]?.arrayValue, let more = reply["more"]?.boolValue else {
                throw CLIError.unexpectedReply(JSONValue.object(reply).description)
            }
            for object in objects {
                Terminal.printLine(object.stringValue ?? object.description)
            }
            remaining -= objects.count
            guard more, let last = objects.last?.stringValue else { return }
            cursor = last
        }
    }
}
