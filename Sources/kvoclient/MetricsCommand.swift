import ArgumentParser
import KVOJSON

/// `kvoclient metrics`: what `GET /metrics` serves, over the protocol (the `metrics` operation, server admins).
struct MetricsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "metrics",
        abstract: "Print the server's Prometheus metrics (what GET /metrics serves), without an HTTP port.",
        discussion: "Server admins only. With a name, prints only the lines of metrics whose names start with it."
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "Only the metrics whose names start with this (kvod_storage_).")
    var prefix: String?

    func run() async throws {
        let reply = try await connection.call("metrics")
        let text = reply["text"]?.stringValue ?? ""
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            if let prefix, !MetricsCommand.line(line, isAbout: prefix) { continue }
            Terminal.printLine(DisplayText.plain(String(line)))
        }
    }

    /// Whether a line of the exposition (`# HELP name …`, `# TYPE name …`, `name{…} value`) is about a metric whose
    /// name starts with `prefix`.
    static func line(_ line: Substring, isAbout prefix: String) -> Bool {
        let words = line.split(separator: " ")
        let name = line.hasPrefix("#") ? (words.count > 2 ? words[2] : "") : (words.first ?? "")
        return name.hasPrefix(prefix)
    }
}
