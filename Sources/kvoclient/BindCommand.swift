import ArgumentParser
import KVOJSON

/// `kvoclient bind <source> <target>`: binds a target key path to a source key path; prints `binding N`.
struct BindCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bind",
        abstract: "Keep a target key path updated from a source key path. Prints `binding N`.",
        discussion: """
            SOURCE and TARGET are OBJECT:KEYPATH, split at the first ':' (`a:x`, `lab:color.l`). Whenever \
            the source changes, the server writes its value to the target: only when --filter is true of \
            it, and converted by --convert. The expressions see the new value as $value. --now also \
            writes the current value at once.
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: ArgumentHelp("The key path to follow, OBJECT:KEYPATH.", valueName: "source"),
              transform: { text throws(ValidationError) in try KeyPathEndpoint(parsing: text) })
    var source: KeyPathEndpoint

    @Argument(help: ArgumentHelp("The key path to write, OBJECT:KEYPATH.", valueName: "target"),
              transform: { text throws(ValidationError) in try KeyPathEndpoint(parsing: text) })
    var target: KeyPathEndpoint

    @Option(help: ArgumentHelp("Write only when this expression is true, such as '$value > 0'.", valueName: "expr"))
    var filter: String?

    @Option(help: ArgumentHelp("Write this expression's result instead of the value, such as '$value * 2'.", valueName: "expr"))
    var convert: String?

    @Flag(help: "Also write the source's current value at once.")
    var now = false

    func run() async throws {
        var params: [String: JSONValue] = ["from": source.json, "to": target.json]
        if let filter { params["filter"] = .string(filter) }
        if let convert { params["convert"] = .string(convert) }
        if now { params["now"] = true }
        let reply = try await connection.call("bind", params)
        try BindingLine.printCreated(reply)
    }
}
