import ArgumentParser
import KVOClient
import KVOCommandLine
import KVOJSON

/// `kvoclient presence <object> <keyPath> <value> --offline <value>`: marks something present for as long as
/// this command runs (docs/protocol.md, "Presence"). It begins a session, sets the key path to the value and
/// registers an `onDisconnect` that sets it to the `--offline` value; with `--ephemeral` it creates the object
/// (`{keyPath: value}`) as an ephemeral object instead, deleted when the session ends. Then it holds the
/// connection until Ctrl-C or SIGTERM, which end the session at once (`endSession`, exit 0). Killed, or cut
/// off for longer than `--grace`, kvod ends the session itself; a shorter cut is resumed by the library's
/// reconnection and runs nothing. Prints `session <id>  grace <s> s` once the session is set up.
struct PresenceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "presence",
        abstract: "Hold a presence mark while running: set a value now and another when this client is gone.",
        discussion: """
            `kvoclient presence users.alice online true --offline false` sets users.alice.online to true and \
            tells kvod to set it to false when this client is gone: on Ctrl-C at once, and if it is killed or \
            loses the network for longer than --grace seconds (10 by default), when that grace is over. A shorter \
            cut is resumed and changes nothing. With --ephemeral the object is created as {keyPath: value} \
            instead and deleted when the client is gone (no --offline). Prints `session <id>  grace <s> s`.
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "The object id.")
    var object: String

    @Argument(help: "The key path of the mark, such as `online`.")
    var keyPath: String

    @Argument(help: "The value while present (JSON, or plain text as a string).")
    var value: String

    @Option(help: "The value once gone (JSON, or plain text as a string).")
    var offline: String?

    @Flag(help: "Create the object as an ephemeral object instead of setting a value: it is deleted once gone.")
    var ephemeral = false

    @Option(help: "Seconds the mark outlives a lost connection (0 to 300; kvod's default, 10, without it).")
    var grace: Double?

    func validate() throws {
        _ = try ValueArgument.parse(value)
        if ephemeral {
            guard offline == nil else { throw ValidationError("--ephemeral deletes the object once gone: give no --offline") }
            guard !keyPath.contains(".") else { throw ValidationError("--ephemeral makes {keyPath: value}: give a top-level key") }
        } else {
            guard let offline else { throw ValidationError("give --offline VALUE (or --ephemeral)") }
            _ = try ValueArgument.parse(offline)
        }
        if let grace, !(0...300).contains(grace) { throw ValidationError("--grace must be a number of seconds from 0 to 300") }
    }

    func run() async throws {
        InterruptFlag.install()
        let present = try ValueArgument.parse(value)
        let client = try await connection.connect(reconnection: KVOClient.ReconnectionPolicy(), heartbeat: 5, requestTimeout: 10)
        defer { client.close() }
        let session = try await client.startSession(grace: grace.map { .milliseconds(Int64(($0 * 1000).rounded())) })
        if ephemeral {
            try await client.create(object, values: [keyPath: present], ephemeral: true)
        } else {
            try await client.set(keyPath, of: object, to: present)
            try await client.onDisconnect(.set(keyPath, of: object, to: try ValueArgument.parse(offline!)))
        }
        let seconds = Double(session.grace.components.seconds) + Double(session.grace.components.attoseconds) / 1e18
        Terminal.printLine("session \(session.id)  grace \(seconds) s")
        // The library resumes the session on every reconnection; one that finds it ended leaves it nil.
        while !InterruptFlag.isSet {
            try? await Task.sleep(nanoseconds: 100_000_000)
            if client.session == nil {
                throw CLIError.connectionLost("the session ended while the connection was lost for longer than its grace; the mark is gone")
            }
        }
        try await client.endSession()
    }
}
