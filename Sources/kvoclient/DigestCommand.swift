import ArgumentParser
import KVOJSON

/// `kvoclient digest`: a digest of the stored state, to compare cluster nodes (the `digest` operation, server admins).
struct DigestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "digest",
        abstract: "Print a SHA-256 digest of the stored state with its revision (equal on nodes that hold the same state).",
        discussion: """
            Server admins only. Prints 'DIGEST rev REV objects N' (in a cluster also the node, applied sequence and \
            integrity). With --json, prints the server's whole reply as one line instead.
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Flag(help: "Print the whole reply as one line of compact JSON (keys sorted).")
    var json = false

    func run() async throws {
        let reply = try await connection.call("digest")
        if json { return ReplyLine.print(reply) }
        var text = "\(reply["digest"]?.stringValue ?? "?") rev \(reply["rev"]?.intValue ?? 0) objects \(reply["objects"]?.intValue ?? 0)"
        if let node = reply["node"]?.stringValue {
            text += " node \(node) applied \(reply["applied"]?.intValue ?? 0) integrity \(reply["integrity"]?.stringValue ?? "?")"
        }
        Terminal.printLine(DisplayText.plain(text))
    }
}
