import ArgumentParser
import KVOClientKit
import KVOJSON

/// `kvoclient subscribe <object> <keyPath>...`: observes key paths and prints their change events.
///
/// Sends one `observe` per key path, then prints one line per event as it arrives (see `EventLine`;
/// `--json` prints each event message as compact JSON instead). It stops with exit 0 after `--count`
/// events, on Ctrl-C (SIGINT) or SIGTERM, or when every subscription has ended with `sourceDeleted`.
/// If the server closes the connection while subscriptions remain, it exits 3.
struct SubscribeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "subscribe",
        abstract: "Observe key paths of an object and print each change event as it arrives.",
        discussion: """
            One line per event: `<object>.<keyPath>  <reason>  [prior]  rev=<rev>  [kind=<kind>  indexes=<json>]  \
            [old=<json>]  [new=<json>]`, for example \
            `clock.date  valueChanged  rev=2  old="2026-11-20"  new="2026-11-21"` or \
            `todo.items  valueChanged  rev=3  kind=insertion  indexes=[1]  new=["milk"]`. \
            Stops after --count events, on Ctrl-C, or once every subscription has ended with sourceDeleted.
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "The object id.")
    var object: String

    @Argument(help: "One or more key paths to observe, such as `date` or `address.city`.")
    var keyPaths: [String]

    @Option(help: "Comma-separated observation options: initial, new, old, prior.")
    var options: String = "new"

    @Flag(help: "Print each event message as one line of compact JSON (keys sorted).")
    var json = false

    @Option(help: "Exit 0 after this many events.")
    var count: Int?

    /// How long one wait for an event lasts before the loop checks for Ctrl-C, in seconds.
    private static let pollInterval = 0.1

    func validate() throws {
        guard !keyPaths.isEmpty else { throw ValidationError("give at least one key path to observe") }
        _ = try ObservationOption.parseList(options)
        if let count, count < 1 { throw ValidationError("--count must be at least 1") }
    }

    func run() throws {
        InterruptFlag.install()
        let observationOptions = try ObservationOption.parseList(options)
        let client = try connection.connect()
        var active: Set<Int64> = []
        for keyPath in keyPaths {
            let reply = try client.call("observe", [
                "object": .string(object),
                "keyPath": .string(keyPath),
                "options": .array(observationOptions.map { .string($0.rawValue) }),
            ])
            guard let sub = reply["sub"]?.intValue else {
                throw CLIError.unexpectedReply(JSONValue.object(reply).description)
            }
            active.insert(sub)
        }
        var printed = 0
        while !InterruptFlag.isSet {
            let next: JSONValue?
            do {
                next = try client.nextEvent(timeout: Self.pollInterval)
            } catch {
                guard error == .connectionClosed else { throw error }
                throw CLIError.streamEnded(endpoint: "\(connection.host):\(connection.port)", activeSubscriptions: active.count)
            }
            guard let event = next else { continue }
            Terminal.printLine(json ? event.description : EventLine.format(event))
            printed += 1
            let isPrior = event["change"]?["notificationIsPrior"] == .bool(true)
            if event["reason"] == "sourceDeleted", !isPrior, let sub = event["sub"]?.intValue {
                active.remove(sub)
            }
            if let count, printed >= count { return }
            if active.isEmpty { return }
        }
    }
}
