import ArgumentParser
import KVOCommandLine
#if canImport(Glibc)
import Glibc
#endif

/// `kvoclient touch <object>`: starts the object's time to live again (docs/protocol.md, "Expiry"); prints
/// `expires in S s` (or `no ttl`) and `rev N`.
struct TouchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "touch",
        abstract: "Start an object's time to live again from now, without writing a value.",
        discussion: "Prints `expires in S s` (`no ttl` for an object without one), then `rev N`."
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "The object id.")
    var object: String

    func run() async throws {
        let (expiresAt, rev) = try await connection.withClient { kvod in try await kvod.touch(object) }
        if let expiresAt {
            var now = timespec()
            clock_gettime(CLOCK_REALTIME, &now)
            let milliseconds = expiresAt - (Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000)
            Terminal.printLine("expires in \(Double(max(0, milliseconds)) / 1000) s")
        } else {
            // (Also for a user who may not read the object: the server does not tell it the deadline.)
            Terminal.printLine("no ttl")
        }
        RevisionLine.print(rev)
    }
}
