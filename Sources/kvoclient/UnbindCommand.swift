import ArgumentParser
import KVOCommandLine
import KVOJSON

/// `kvoclient unbind <id>`: removes a binding; prints `removed`, or `not bound` when there was none.
struct UnbindCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unbind",
        abstract: "Remove a binding by id. Prints `removed`, or `not bound` when no binding has that id.",
        discussion: "Both exit 0: unbinding twice is safe."
    )

    @OptionGroup var connection: ConnectionOptions

    /// Captured as `allUnrecognized` words, so that `-1` gets "must be 0 or more" instead of being
    /// taken for an option.
    @Argument(parsing: .allUnrecognized, help: ArgumentHelp("The binding id that `bind` or `combine` printed.", valueName: "id"))
    var words: [String] = []

    /// The binding id, or nil when the words are not exactly one.
    private var binding: Int64? {
        get throws(NumberArgument.Invalid) {
            let given = ValueArgument.droppingTerminator(words)
            guard given.count == 1 else { return nil }
            do {
                return Int64(try NumberArgument.nonNegative(given[0]))
            } catch {
                throw NumberArgument.Invalid(description: "binding id '\(given[0])' \(error.description)")
            }
        }
    }

    func validate() throws {
        let given = ValueArgument.droppingTerminator(words)
        guard !given.isEmpty else { throw ValidationError("Missing expected argument '<id>'") }
        guard given.count == 1 else { throw ValidationError("expected one binding id, got \(given.count) (\(given.joined(separator: " ")))") }
        do { _ = try binding } catch { throw ValidationError(error.description) }
    }

    func run() async throws {
        let reply = try await connection.call("unbind", ["binding": .int(try binding ?? 0)])
        guard let removed = reply["removed"]?.boolValue else {
            throw CLIError.unexpectedReply(JSONValue.object(reply).description)
        }
        Terminal.printLine(removed ? "removed" : "not bound")
    }
}
