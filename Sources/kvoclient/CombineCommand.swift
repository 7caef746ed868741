import ArgumentParser
import KVOJSON

/// `kvoclient combine --source A:X --source B:Y --to C:Z --reduce EXPR`: a combineLatest binding;
/// prints `binding N`.
struct CombineCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "combine",
        abstract: "Keep a target key path updated from several source key paths (combineLatest). Prints `binding N`.",
        discussion: """
            Each key path is OBJECT:KEYPATH, split at the first ':'. Whenever any source changes, the \
            server writes --reduce, computed from the latest value of every source ($0, $1, ... in the \
            order of the --source options), to the target: only when --filter is true of them. --now \
            also writes at once.
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Option(name: .customLong("source"),
            help: ArgumentHelp("A key path to follow, OBJECT:KEYPATH; repeat for each source, in order.", valueName: "object:keyPath"),
            transform: { text throws(ValidationError) in try KeyPathEndpoint(parsing: text) })
    var sources: [KeyPathEndpoint] = []

    @Option(help: ArgumentHelp("The key path to write, OBJECT:KEYPATH.", valueName: "object:keyPath"),
            transform: { text throws(ValidationError) in try KeyPathEndpoint(parsing: text) })
    var to: KeyPathEndpoint

    @Option(help: ArgumentHelp("The value to write, computed from the sources, such as '$0 + $1'.", valueName: "expr"))
    var reduce: String

    @Option(help: ArgumentHelp("Write only when this expression is true, such as '$0 > 0'.", valueName: "expr"))
    var filter: String?

    @Flag(help: "Also write the combined current values at once.")
    var now = false

    func validate() throws {
        if sources.isEmpty { throw ValidationError("give at least one --source OBJECT:KEYPATH") }
    }

    func run() async throws {
        var params: [String: JSONValue] = [
            "sources": .array(sources.map(\.json)), "to": to.json, "reduce": .string(reduce),
        ]
        if let filter { params["filter"] = .string(filter) }
        if now { params["now"] = true }
        let reply = try await connection.call("combineLatest", params)
        try BindingLine.printCreated(reply)
    }
}
