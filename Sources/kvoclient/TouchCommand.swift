import ArgumentParser
import KVOCommandLine
#if canImport(Glibc)
import Glibc
#endif

/// `kvoclient touch <object>`: starts the object's time to live again (docs/protocol.md, "Expiry"); prints
/// `expires in S s` (`no ttl` for an object without one, `deadline not shown (no read right)` to a user who may
/// write the object but not read it: the server leaves `expiresAt` out for them) and `rev N`.
struct TouchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "touch",
        abstract: "Start an object's time to live again from now, without writing a value.",
        discussion: "Prints `expires in S s` (`no ttl` for an object without one; `deadline not shown (no read right)` when you may write the object but not read it), then `rev N`."
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "The object id.")
    var object: String

    func run() async throws {
        // The reply itself, not KVOClient.touch's pair: a missing `expiresAt` (not told) and `null` (no ttl) differ.
        let reply = try await connection.withClient { kvod in
            try await kvod.request("touch", ["object": .string(object)], isWrite: true)
        }
        let rev = reply["rev"]?.intValue ?? 0
        if reply["expiresAt"] == nil {
            Terminal.printLine("deadline not shown (no read right)")
        } else if let expiresAt = reply["expiresAt"]?.intValue {
            var now = timespec()
            clock_gettime(CLOCK_REALTIME, &now)
            let milliseconds = expiresAt - (Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000)
            Terminal.printLine("expires in \(Double(max(0, milliseconds)) / 1000) s")
        } else {
            Terminal.printLine("no ttl")
        }
        RevisionLine.print(rev)
    }
}
