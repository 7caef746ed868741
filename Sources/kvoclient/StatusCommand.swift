import ArgumentParser
import Foundation
import KVOJSON

/// `kvoclient status`: the server at a glance (the `status` operation, server admins), one fact a line, or the
/// reply as one line of JSON with `--json`.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the server's state: version, uptime, revision, objects, connections, storage, history, cluster, alarms.",
        discussion: "Server admins only. With --json, prints the server's whole reply as one line instead."
    )

    @OptionGroup var connection: ConnectionOptions

    @Flag(help: "Print the whole reply as one line of compact JSON (keys sorted).")
    var json = false

    func run() async throws {
        let reply = try await connection.call("status")
        if json { return ReplyLine.print(reply) }
        for (label, text) in StatusCommand.lines(reply) {
            Terminal.printLine(label.padding(13) + DisplayText.plain(text))
        }
    }

    /// The human lines: a label and its text.
    static func lines(_ reply: [String: JSONValue]) -> [(String, String)] {
        let number = { (value: JSONValue?) in value?.intValue.map(String.init) ?? "?" }
        var lines: [(String, String)] = []
        let commit = reply["commit"]?.stringValue ?? "?"
        lines.append(("version", "kvod \(reply["version"]?.stringValue ?? "?") (\(commit == "unknown" ? commit : String(commit.prefix(7))))"))
        lines.append(("uptime", Quantity.duration(reply["uptimeSeconds"]?.doubleValue ?? 0)))
        let listeners = (reply["listeners"]?.arrayValue ?? []).map { "\($0["address"]?.stringValue ?? "?") (\($0["role"]?.stringValue ?? "?"))" }
        lines.append(("listening", listeners.joined(separator: ", ")))
        lines.append(("revision", number(reply["rev"])))
        lines.append(("objects", number(reply["objects"])))
        lines.append(("observations", number(reply["observations"])))
        let connections = reply["connections"]?.objectValue ?? [:]
        let kinds = connections.keys.filter { $0 != "total" }.sorted().map { "\($0) \(number(connections[$0]))" }
        lines.append(("connections", "\(number(connections["total"])) (\(kinds.joined(separator: ", ")))"))
        let sessions = reply["sessions"]?.objectValue ?? [:]
        lines.append(("sessions", "\(number(sessions["total"])) (\(number(sessions["detached"])) detached)"))
        lines.append(("storage", storage(reply["storage"]?.objectValue ?? [:])))
        let history = reply["history"]?.objectValue ?? [:]
        let oldest = history["oldestRev"]?.intValue.map(String.init) ?? "none"
        lines.append(("history", "revisions \(oldest)..\(number(history["newestRev"])) (\(number(history["changes"])) changes, "
                      + "\(Quantity.bytes(history["bytes"]?.intValue)))"))
        if let backup = reply["lastBackup"]?.objectValue {
            let finished = backup["finished"]?.intValue.map { Date(timeIntervalSince1970: Double($0) / 1000).ISO8601Format() } ?? "?"
            lines.append(("last backup", "\(finished) at revision \(number(backup["rev"])) (\(number(backup["objects"])) objects, "
                          + "\(Quantity.bytes(backup["bytes"]?.intValue)))"))
        } else {
            lines.append(("last backup", "none since the start"))
        }
        lines.append(("cluster", cluster(reply["cluster"])))
        let alarms = reply["alarms"]?.arrayValue ?? []
        if alarms.isEmpty { lines.append(("alarms", "none")) }
        for alarm in alarms {
            lines.append(("alarm", "\(alarm["alarm"]?.stringValue ?? "?"): \(alarm["reason"]?.stringValue ?? "")"))
        }
        return lines
    }

    private static func storage(_ storage: [String: JSONValue]) -> String {
        var text = "\(storage["kind"]?.stringValue ?? "?"), \(storage["state"]?.stringValue ?? "?")"
        if let directory = storage["directory"]?.stringValue { text += " in \(directory)" }
        if storage["databaseBytes"] != nil {
            text += "; database \(Quantity.bytes(storage["databaseBytes"]?.intValue)), wal \(Quantity.bytes(storage["walBytes"]?.intValue))"
            text += "; \(Quantity.bytes(storage["fileSystemFreeBytes"]?.intValue)) free of \(Quantity.bytes(storage["fileSystemBytes"]?.intValue))"
        }
        return text
    }

    private static func cluster(_ value: JSONValue?) -> String {
        guard let cluster = value?.objectValue else { return "none (a single node)" }
        let peers = cluster["peers"]?.arrayValue ?? []
        return "node \(cluster["node"]?.stringValue ?? "?") of stream \(cluster["stream"]?.stringValue ?? "?"), "
            + "\(cluster["state"]?.stringValue ?? "?"), applied \(cluster["applied"]?.intValue ?? 0); "
            + "\(peers.count) peer\(peers.count == 1 ? "" : "s"), \(cluster["peersAgreeing"]?.intValue ?? 0) agreeing, "
            + "\(cluster["peersDisagreeing"]?.intValue ?? 0) disagreeing"
    }
}

extension String {
    /// Padded with spaces to `width` characters (never cut).
    func padding(_ width: Int) -> String {
        count >= width ? self + " " : self + String(repeating: " ", count: width - count)
    }
}
