import ArgumentParser
import KVOServer
#if canImport(Glibc)
import Glibc
#endif

/// `kvod backup --data DIR FILE`: a consistent copy of a data directory's database, taken while kvod runs
/// (or not), checked before it is given its name (`StoreBackup`). Prints one line saying what the backup
/// holds; failures are one `kvod backup: error: …` line, exit 1 (`KVOD.main`).
struct BackupCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kvod backup",
        abstract: "Copy a data directory's database, consistently, while kvod runs or not.",
        discussion: """
            The copy is the database as one commit left it: every write kvod acknowledged before the backup began. \
            It is written as FILE.partial (mode 0600: it holds the users' hashes), read back whole, synced and only \
            then given the name FILE, which must not exist. To restore it: stop kvod, then `kvod restore --data DIR FILE`.
            """)

    @Option(name: .long, help: ArgumentHelp("The data directory of the kvod to back up (kvod's --data).", valueName: "dir"))
    var data: String

    @Argument(help: ArgumentHelp("The backup file to write (it must not exist).", valueName: "file"))
    var file: String

    func run() throws {
        var start = timespec()
        clock_gettime(CLOCK_MONOTONIC, &start)
        let summary = try StoreBackup.copy(dataDirectory: data, to: file)
        var end = timespec()
        clock_gettime(CLOCK_MONOTONIC, &end)
        let milliseconds = Int(end.tv_sec - start.tv_sec) * 1_000 + Int(end.tv_nsec - start.tv_nsec) / 1_000_000
        print("wrote \(file): revision \(summary.revision), \(summary.objects) object\(summary.objects == 1 ? "" : "s"), "
              + "\(summary.historyRows) history row\(summary.historyRows == 1 ? "" : "s"), schema \(summary.schemaVersion), "
              + "\(summary.bytes) bytes, in \(milliseconds) ms")
    }
}
