import ArgumentParser
import KVOServer

/// `kvod restore --data DIR FILE [--replace]`: puts a backup (`kvod backup`) in place as a stopped kvod's
/// database (`StoreRestore`). Prints what was restored and what was set aside; failures are one
/// `kvod restore: error: …` line, exit 1 (`KVOD.main`).
struct RestoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kvod restore",
        abstract: "Put a backup in place as a stopped kvod's database.",
        discussion: """
            The backup is checked first (read back whole, a kvod database this kvod reads); a damaged or foreign \
            file changes nothing. kvod must be stopped (its lock is taken). A database already in DIR is kept: \
            with --replace it is renamed to kvod.sqlite3.replaced-<UTC time> (with its -wal), never deleted.
            """)

    @Option(name: .long, help: ArgumentHelp("The data directory to restore into (kvod's --data).", valueName: "dir"))
    var data: String

    @Argument(help: ArgumentHelp("The backup file (written by kvod backup).", valueName: "file"))
    var file: String

    @Flag(help: "Set the data directory's current database aside (renamed, not deleted) and restore over it.")
    var replace = false

    func run() throws {
        let outcome = try StoreRestore.restore(from: file, dataDirectory: data, replace: replace)
        for path in outcome.setAside { print("set aside \(path)") }
        let summary = outcome.summary
        print("restored \(file) into \(data): revision \(summary.revision), \(summary.objects) object\(summary.objects == 1 ? "" : "s"), "
              + "\(summary.historyRows) history row\(summary.historyRows == 1 ? "" : "s"), schema \(summary.schemaVersion)")
    }
}
