import ArgumentParser
import KVOCommandLine
import KVOJSON

/// `kvoclient kill <id>`: closes one of kvod's connections (server admins), as a disconnect would.
struct KillCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kill",
        abstract: "Close one of kvod's connections by id (server admins); `clients` lists them.",
        discussion: """
            The connection is told why (a `closed` error) and closed; its observations end and its session, if any, \
            waits its grace as after any disconnect. Prints `killed <id>`. An id no open connection has is the \
            server's not_found error (exit 1).
            """
    )

    @OptionGroup var connection: ConnectionOptions

    /// Captured as `allUnrecognized` words, so that `-1` gets "must be 1 or more" instead of being taken for an option.
    @Argument(parsing: .allUnrecognized, help: ArgumentHelp("The connection id that `clients` printed.", valueName: "id"))
    var words: [String] = []

    /// The connection id, or nil when the words are not exactly one.
    private var target: Int64? {
        get throws(NumberArgument.Invalid) {
            let given = ValueArgument.droppingTerminator(words)
            guard given.count == 1 else { return nil }
            do {
                return Int64(try NumberArgument.positive(given[0]))
            } catch {
                throw NumberArgument.Invalid(description: "connection id '\(given[0])' \(error.description)")
            }
        }
    }

    func validate() throws {
        let given = ValueArgument.droppingTerminator(words)
        guard !given.isEmpty else { throw ValidationError("Missing expected argument '<id>'") }
        guard given.count == 1 else { throw ValidationError("expected one connection id, got \(given.count) (\(given.joined(separator: " ")))") }
        do { _ = try target } catch { throw ValidationError(error.description) }
    }

    func run() async throws {
        let reply = try await connection.call("kill", ["connection": .int(try target ?? 0)])
        guard let killed = reply["connection"]?.intValue else {
            throw CLIError.unexpectedReply(JSONValue.object(reply).description)
        }
        Terminal.printLine("killed \(killed)")
    }
}
