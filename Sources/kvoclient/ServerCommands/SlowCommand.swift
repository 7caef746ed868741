import ArgumentParser
import KVOJSON

/// `kvoclient slow`: prints the server's slow-request log (server admins): requests whose handling took kvod's
/// loop at least `--slow-request`, then the loop iterations that worked that long (stalls), newest first.
struct SlowCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "slow",
        abstract: "Print the requests and loop stalls that took kvod at least --slow-request (server admins).",
        discussion: """
            A request reads `request  at=<UTC time>  ms=<loop time>  op=<op>  object=<id>  keyPath=<path>  \
            connection=<id>  user=<name>` (no values: `object` and `keyPath` when the request named them, \
            `user=-` in open mode); a stall reads `stall  at=<UTC time>  ms=<work>  requests=<n>  events=<n>  \
            commits=<n>  commitMs=<time>  housekeeping=<yes|no>  clusterEntries=<n>`. Newest first, at most 128 \
            of each; nothing recorded: no output. --reset empties the log after printing it.
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Flag(help: "Empty the log once it is printed (as Redis's SLOWLOG RESET).")
    var reset = false

    @Flag(help: "Print the reply as one line of compact JSON (keys sorted), with the threshold (thresholdMicros).")
    var json = false

    func run() async throws {
        let reply = try await connection.call("slow", reset ? ["reset": .bool(true)] : [:])
        guard let requests = reply["requests"]?.arrayValue, let stalls = reply["stalls"]?.arrayValue else {
            throw CLIError.unexpectedReply(JSONValue.object(reply).description)
        }
        if json {
            Terminal.printLine(DisplayText.json(.object(reply)))
            return
        }
        for request in requests {
            var fields = ["request", "at=\(Self.time(request["at"]))", "ms=\(Self.duration(request["micros"]))",
                          "op=\(Self.text(request["op"]))"]
            if let object = request["object"] { fields.append("object=\(Self.text(object))") }
            if let keyPath = request["keyPath"] { fields.append("keyPath=\(Self.text(keyPath))") }
            fields.append("connection=\(Self.text(request["connection"]))")
            fields.append("user=\(request["user"] == .null ? "-" : Self.text(request["user"]))")
            Terminal.printLine(fields.joined(separator: "  "))
        }
        for stall in stalls {
            Terminal.printLine([
                "stall", "at=\(Self.time(stall["at"]))", "ms=\(Self.duration(stall["micros"]))",
                "requests=\(Self.text(stall["requests"]))", "events=\(Self.text(stall["events"]))",
                "commits=\(Self.text(stall["commits"]))", "commitMs=\(Self.duration(stall["commitMicros"]))",
                "housekeeping=\(stall["housekeeping"] == .bool(true) ? "yes" : "no")",
                "clusterEntries=\(Self.text(stall["clusterEntries"]))",
            ].joined(separator: "  "))
        }
    }

    static func time(_ value: JSONValue?) -> String {
        guard let milliseconds = value?.intValue else { return "-" }
        return WallClockText.iso8601(milliseconds: milliseconds)
    }

    static func duration(_ value: JSONValue?) -> String {
        guard let micros = value?.intValue else { return "-" }
        return WallClockText.milliseconds(micros: micros)
    }

    /// A string without quotes, anything else as JSON, escaped for the terminal.
    static func text(_ value: JSONValue?) -> String {
        guard let value else { return "-" }
        return DisplayText.text(value)
    }
}
