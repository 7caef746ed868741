import ArgumentParser
import KVOJSON

/// `kvoclient bindings`: prints every binding, one per line.
struct BindingsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bindings",
        abstract: "Print every binding, one per line.",
        discussion: """
            A bind reads `<id>  <source> -> <target>  [filter <expr>]  [convert <expr>]`, such as \
            `7  a:x -> b:y  filter $value > 0  convert $value * 2`; a combineLatest reads \
            `<id>  combineLatest(<source>, ...) -> <target>  reduce <expr>  [filter <expr>]`, such as \
            `8  combineLatest(a:x, b:y) -> c:z  reduce $0 + $1`. No bindings: no output.
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Flag(help: "Print each binding as one line of compact JSON (keys sorted).")
    var json = false

    func run() async throws {
        let reply = try await connection.call("bindings")
        guard let bindings = reply["bindings"]?.arrayValue else {
            throw CLIError.unexpectedReply(JSONValue.object(reply).description)
        }
        for binding in bindings {
            if json {
                Terminal.printLine(DisplayText.json(binding))
            } else {
                Terminal.printLine(try BindingLine.text(binding))
            }
        }
    }
}
