import ArgumentParser
import KVOJSON

/// `kvoclient compact`: the server's database gives its free pages back to the file system (docs/protocol.md,
/// "compact"), without stopping kvod. Server admins only.
struct CompactCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "compact",
        abstract: "Give the server database's free pages back to the file system (server admins).",
        discussion: """
            kvod moves pages from the end of its database into free ones a few megabytes at a time, between requests, \
            then truncates its write-ahead log. Prints the bytes the database and its log took on disk before and \
            after. Taken while kvod refuses writes for --max-disk.
            """)

    @OptionGroup var connection: ConnectionOptions

    func run() async throws {
        let reply = try await connection.call("compact", timeout: nil)
        func number(_ key: String) -> Int64 { if case let .int(value)? = reply[key] { return value } else { return 0 } }
        let pages = number("pagesReclaimed")
        Terminal.printLine("compacted: \(pages) free page\(pages == 1 ? "" : "s") given back; on disk \(number("bytesBefore")) bytes before, "
                           + "\(number("bytesAfter")) after")
    }
}
