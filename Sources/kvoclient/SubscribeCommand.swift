import ArgumentParser
import KVOClientKit
import KVOCommandLine
import KVOJSON

/// `kvoclient subscribe <object> <keyPath>...`: observes key paths and prints their change events.
///
/// Sends one `observe` per key path, then prints one line per event as it arrives (see `EventLine`;
/// `--json` prints each event message as compact JSON instead). It stops with exit 0 after `--count`
/// events, on Ctrl-C (SIGINT) or SIGTERM, or when every subscription has ended with `sourceDeleted`.
///
/// When the connection drops (kvod restarts, the network fails), it says so on stderr and connects
/// again with exponential backoff (100 ms doubling to 5 s, with jitter), re-observing each key path
/// with `sinceRev` set to the last revision it printed for it, so that every change is printed once
/// and in order (or one `resync` line, when kvod's history no longer reaches back that far). A first
/// connection that fails, or with `--no-reconnect` any lost connection, ends it with exit 3.
///
/// A connection can also die without closing (the server's host vanished, a stopped process, a
/// network path lost): after `--heartbeat` seconds without a message it pings kvod, and no answer
/// within as long again counts as a lost connection.
struct SubscribeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "subscribe",
        abstract: "Observe key paths of an object and print each change event as it arrives.",
        discussion: """
            One line per event: `<object>.<keyPath>  <reason>  [prior]  rev=<rev>  [kind=<kind>  indexes=<json>]  \
            [old=<json>]  [new=<json>]`, for example \
            `clock.date  valueChanged  rev=2  old="2026-11-20"  new="2026-11-21"` or \
            `todo.items  valueChanged  rev=3  kind=insertion  indexes=[1]  new=["milk"]`. \
            Stops after --count events, on Ctrl-C, or once every subscription has ended (sourceDeleted or forbidden).

            If the connection drops, subscribe reconnects with backoff and resumes after the last \
            revision it printed: no change is lost or printed twice. When the server's history no \
            longer reaches back that far, one `resync` line carries the current value instead. \
            After --heartbeat seconds without a message it pings the server; no answer within as long \
            again also counts as a lost connection. Notes about the connection go to standard error.
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Argument(help: "The object id.")
    var object: String

    @Argument(help: "One or more key paths to observe, such as `date` or `address.city`.")
    var keyPaths: [String]

    @Option(help: "Comma-separated observation options: initial, new, old, prior.")
    var options: String = "new"

    @Flag(help: "Print each event message as one line of compact JSON (keys sorted); `sub` keeps the number of the first connection's subscription across reconnections.")
    var json = false

    @Option(parsing: .unconditional, help: "Exit 0 after this many events.", transform: NumberArgument.positive)
    var count: Int?

    @Flag(help: "Exit 3 when the connection drops instead of reconnecting and resuming.")
    var noReconnect = false

    @Option(parsing: .unconditional,
            help: "Seconds without a message before pinging the server; no answer within as long again means the connection is lost (0: never ping).",
            transform: NumberArgument.seconds)
    var heartbeat: Double = 15

    /// How long one wait for an event lasts before the loop checks for Ctrl-C, in seconds.
    private static let pollInterval = 0.1

    func validate() throws {
        guard !keyPaths.isEmpty else { throw ValidationError("give at least one key path to observe") }
        _ = try ObservationOption.parseList(options)
        if let count, count < 1 { throw ValidationError("--count must be at least 1") }
        if !(heartbeat >= 0 && heartbeat.isFinite) { throw ValidationError("--heartbeat must be a number of seconds, 0 or more") }
    }

    func run() throws {
        InterruptFlag.install()
        var subscriptions = SubscriptionSet(
            object: object, keyPaths: keyPaths, options: try ObservationOption.parseList(options))
        var client = try connection.connect()
        try subscriptions.observe(on: client, resuming: false)
        var printed = 0
        var lastHeard = monotonicSeconds()
        while !InterruptFlag.isSet {
            let next: JSONValue?
            do {
                next = try client.nextEvent(timeout: Self.pollInterval)
                if next != nil {
                    lastHeard = monotonicSeconds()
                } else if heartbeat > 0, monotonicSeconds() - lastHeard >= heartbeat {
                    // Events that arrive meanwhile are queued for nextEvent.
                    try client.call("ping", timeout: heartbeat)
                    lastHeard = monotonicSeconds()
                }
            } catch {
                if noReconnect || !error.isConnectionLoss {
                    guard error == .connectionClosed else { throw error }
                    throw CLIError.streamEnded(endpoint: endpoint, activeSubscriptions: subscriptions.activeCount)
                }
                Terminal.printToStandardError("kvoclient: lost the connection to \(endpoint) (\(DisplayText.plain(error.description))); reconnecting\n")
                client.close()
                guard let resumed = try reconnect(&subscriptions) else { return }
                client = resumed
                lastHeard = monotonicSeconds()
                continue
            }
            guard let event = next, subscriptions.accept(event) else { continue }
            Terminal.printLine(json ? DisplayText.json(subscriptions.withStableSub(event)) : EventLine.format(event))
            printed += 1
            if let count, printed >= count { return }
            if subscriptions.isFinished { return }
        }
    }

    /// `host:port`, for messages.
    private var endpoint: String { "\(connection.host):\(connection.port)" }

    /// Connects again, waiting with backoff between attempts, until every key path still active is
    /// observed again from where it stopped. Returns the new connection, or nil when SIGINT or
    /// SIGTERM arrived meanwhile. An error answer from the server (the object no longer exists,
    /// say) ends the command.
    private func reconnect(_ subscriptions: inout SubscriptionSet) throws(KVOClientError) -> KVOConnection? {
        var backoff = Backoff()
        while Backoff.sleep(backoff.nextDelay()) {
            let client: KVOConnection
            do {
                client = try connection.connect()
                try subscriptions.observe(on: client, resuming: true)
            } catch {
                guard error.isConnectionLoss else { throw error }
                continue
            }
            Terminal.printToStandardError(
                "kvoclient: reconnected to \(endpoint); resuming \(subscriptions.resumeSummary)\n")
            return client
        }
        return nil
    }
}
