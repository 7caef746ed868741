import ArgumentParser
import KVOServer

/// `kvod verify FILE`: checks a backup (`kvod backup`, `kvoclient backup`) without restoring it (`StoreBackup.verify`):
/// prints one line saying what it holds, exit 0; a damaged, truncated or foreign file is one
/// `kvod verify: error: …` line, exit 1 (`KVOD.main`). Reads the file only.
struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kvod verify",
        abstract: "Check a backup file without restoring it.",
        discussion: """
            The checks `kvod restore` makes before it changes anything: a regular SQLite file, read back whole \
            (SQLite's integrity check), a kvod database of a schema this kvod reads, its revision and objects.
            """)

    @Argument(help: ArgumentHelp("The backup file (written by kvod backup or kvoclient backup).", valueName: "file"))
    var file: String

    func run() throws {
        let summary = try StoreBackup.verify(file)
        print("\(file) is a whole kvod backup: revision \(summary.revision), \(summary.objects) object\(summary.objects == 1 ? "" : "s"), "
              + "\(summary.historyRows) history row\(summary.historyRows == 1 ? "" : "s"), schema \(summary.schemaVersion), "
              + "\(summary.bytes) bytes")
    }
}
