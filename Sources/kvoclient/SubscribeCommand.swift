import ArgumentParser
import KVOClient
import KVOCommandLine
import KVOJSON

/// `kvoclient subscribe <object> <keyPath>...`: observes key paths and prints their change events.
/// `kvoclient subscribe --pattern <pattern> [<keyPath>...]`: observes the objects whose ids match the
/// pattern: their creations and deletions without a key path, else each key path on every one of them.
///
/// Sends one `observe` per key path, then prints one line per event as it arrives (see `EventLine`;
/// `--json` prints each event message as compact JSON instead). It stops with exit 0 after `--count`
/// events, on Ctrl-C (SIGINT) or SIGTERM, or when every subscription has ended with `sourceDeleted`.
///
/// Built on the `KVOClient` library: one `KVOObservation` per key path (made with `subscribe`, so that a
/// refusal such as `not_found` ends the command before anything is printed), each iterated by a task
/// of its own; their changes, the client's connection states and the interrupt meet in one
/// `AsyncStream` that a single loop prints from. Reconnection, resumption and the heartbeat are the
/// library's: when the connection drops (kvod restarts, the network fails) it connects again with
/// exponential backoff (100 ms doubling to 5 s, with jitter) and re-observes each key path with
/// `sinceRev`, so that every change is printed once and in order (or one `resync` line, when kvod's
/// history no longer reaches back that far); after `--heartbeat` seconds without a message it pings
/// kvod, and no answer within as long again counts as a lost connection. This command turns the
/// connection states into the notes on stderr (`lost the connection …; reconnecting`, and once a
/// `ping` after the reconnection shows every resubscription accepted, `reconnected …; resuming …`).
/// A first connection that fails, or with `--no-reconnect` any lost connection, ends it with exit 3.
/// `--json` prints each change as its event message, with `sub` the library's stable `Change.sub`.
struct SubscribeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "subscribe",
        abstract: "Observe key paths of an object and print each change event as it arrives.",
        discussion: """
            One line per event: `<object>.<keyPath>  <reason>  [prior]  rev=<rev>  [kind=<kind>  indexes=<json>]  \
            [old=<json>]  [new=<json>]`, for example \
            `clock.date  valueChanged  rev=2  old="2026-11-20"  new="2026-11-21"` or \
            `todo.items  valueChanged  rev=3  kind=insertion  indexes=[1]  new=["milk"]`. \
            Stops after --count events, on Ctrl-C, or once every subscription has ended (sourceDeleted or forbidden).

            With --pattern (`user:*`: an exact id or a glob, `*` standing for any run of characters) the \
            positional arguments are key paths, observed on every object whose id matches, present and \
            future (`user:2.address.city  created  rev=5  new="Oslo"`); with none, the creations and \
            deletions of matching ids (`user:2  created  rev=5`; with --options initial, first one line \
            listing the matching ids). A pattern subscription goes on after a sourceDeleted.

            With --where (`--pattern 'order:*' --where "status == 'open' && total > 100"`) it is a live \
            query: only the matching objects on which the expression holds are in the set; an object \
            coming in prints `entered` (`order:7  entered  rev=9`, with its value for a key path), one going \
            out (or deleted) prints `left`, and --options initial first lists the objects in the set.

            If the connection drops, subscribe reconnects with backoff and resumes after the last \
            revision it printed: no change is lost or printed twice. When the server's history no \
            longer reaches back that far, one `resync` line carries the current value instead. \
            After --heartbeat seconds without a message it pings the server; no answer within as long \
            again also counts as a lost connection. Notes about the connection go to standard error.
            """
    )

    @OptionGroup var connection: ConnectionOptions

    @Option(help: "Observe the objects whose ids match this pattern (`user:*`) instead of one object: the arguments are then key paths (none: creations and deletions).")
    var pattern: String?

    @Option(name: .customLong("where"),
            help: "With --pattern: a live query, only the objects on which this expression of their key paths holds (`status == 'open' && total > 100`).")
    var filter: String?

    @Argument(help: "The object id (with --pattern, the first key path, if any).")
    var object: String?

    @Argument(help: "One or more key paths to observe, such as `date` or `address.city`.")
    var keyPaths: [String] = []

    /// What to observe: with a pattern, every positional argument is a key path (none: the id set).
    private var observedKeyPaths: [String] {
        guard pattern != nil else { return keyPaths }
        return (object.map { [$0] } ?? []) + keyPaths
    }

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

    /// How often the interrupt watcher looks for Ctrl-C, in seconds.
    private static let interruptPollInterval = 0.05

    func validate() throws {
        if pattern == nil, filter != nil { throw ValidationError("--where goes with --pattern (a live query is over a set of objects)") }
        if pattern == nil {
            guard object != nil else { throw ValidationError("Missing expected argument '<object>'") }
            guard !keyPaths.isEmpty else { throw ValidationError("give at least one key path to observe") }
        }
        _ = try ObservationOption.parseList(options)
        if let count, count < 1 { throw ValidationError("--count must be at least 1") }
        if !(heartbeat >= 0 && heartbeat.isFinite) { throw ValidationError("--heartbeat must be a number of seconds, 0 or more") }
    }

    func run() async throws {
        InterruptFlag.install()
        var observationOptions: ObservationOptions = []
        for option in try ObservationOption.parseList(options) {
            switch option {
            case .initial: observationOptions.insert(.initial)
            case .new: observationOptions.insert(.new)
            case .old: observationOptions.insert(.old)
            case .prior: observationOptions.insert(.prior)
            }
        }
        let client = try await connection.connect(
            reconnection: noReconnect ? nil : KVOClient.ReconnectionPolicy(), heartbeat: heartbeat, requestTimeout: 10)
        defer { client.close() }
        // Taken before the first observation, so that no transition after it is missed.
        let states = client.states
        var observations: [KVOObservation<JSONValue>] = []
        // Labels for the notes: a pattern's key paths as `pattern keyPath`, its id set as the pattern.
        var labels: [String] = []
        if let pattern {
            for keyPath in observedKeyPaths.isEmpty ? [nil] : observedKeyPaths.map(Optional.some) {
                observations.append(try await client.subscribe(pattern: pattern, keyPath: keyPath, where: filter,
                                                               options: observationOptions, as: JSONValue.self))
                labels.append(keyPath.map { "\(pattern) \($0)" } ?? pattern)
            }
        } else {
            for keyPath in keyPaths {
                observations.append(try await client.subscribe(keyPath, of: object!, options: observationOptions, as: JSONValue.self))
                labels.append(keyPath)
            }
        }
        let (events, sink) = AsyncStream<SubscriberEvent>.makeStream(bufferingPolicy: .unbounded)
        var tasks: [Task<Void, Never>] = []
        for (index, observation) in observations.enumerated() {
            tasks.append(Task {
                do {
                    for try await change in observation { sink.yield(.change(index, change)) }
                    sink.yield(.ended(index))
                } catch {
                    sink.yield(.failed(index, error))
                }
            })
        }
        tasks.append(Task {
            for await state in states { sink.yield(.state(state)) }
        })
        tasks.append(Task {
            while !InterruptFlag.isSet {
                try? await Task.sleep(nanoseconds: UInt64(Self.interruptPollInterval * 1e9))
            }
            sink.yield(.interrupted)
        })
        defer { for task in tasks { task.cancel() } }
        var progress = SubscriptionProgress(keyPaths: labels, startingRevisions: observations.map(\.subscribedRevision),
                                            patterns: pattern != nil)
        var printed = 0
        var connected = true
        for await event in events {
            switch event {
            case let .change(index, change):
                progress.record(change, at: index)
                let message = Self.message(for: change)
                Terminal.printLine(json ? DisplayText.json(message) : EventLine.format(message))
                printed += 1
                if let count, printed >= count { return }
                if progress.isFinished { return }
            case let .ended(index):
                progress.end(index)
                if progress.isFinished { return }
            case let .failed(_, error):
                // The client closed (reconnection off): the state that follows says why.
                if case .closed? = error as? KVODError { continue }
                throw error
            case let .state(.disconnected(libraryReason)):
                let reason = describe(libraryReason)
                if noReconnect {
                    guard reason == Self.closedByServer else { throw CLIError.connectionLost(reason) }
                    throw CLIError.streamEnded(endpoint: endpoint, activeSubscriptions: progress.activeCount)
                }
                guard connected else { continue }
                connected = false
                progress.markResumePoint()
                Terminal.printToStandardError("kvoclient: lost the connection to \(endpoint) (\(DisplayText.plain(reason))); reconnecting\n")
            case .state(.connected):
                guard !connected else { continue }
                connected = true
                Task {
                    // Answered after every resubscription sent before it (replies come in order).
                    guard (try? await client.ping()) != nil else { return }
                    sink.yield(.resumed(liveObservations: client.liveObservationCount))
                }
            case .state(.closed):
                throw CLIError.streamEnded(endpoint: endpoint, activeSubscriptions: progress.activeCount)
            case .state:
                continue
            case let .resumed(live):
                // Fewer live than active: a resubscription was refused, and its error ends the command.
                guard connected, live >= progress.activeCount else { continue }
                Terminal.printToStandardError("kvoclient: reconnected to \(endpoint); resuming \(progress.resumeSummary)\n")
            case .interrupted:
                return
            }
        }
    }

    /// The reason `KVOClient` gives when the server closed the connection.
    private static let closedByServer = "the server closed the connection"

    /// The library's reason for a lost connection in kvoclient's words: an unanswered heartbeat is
    /// "timed out waiting for the server", as it has always read.
    private func describe(_ reason: String) -> String {
        heartbeat > 0 && reason == ConnectionState.heartbeatTimeoutReason(after: heartbeat) ? "timed out waiting for the server" : reason
    }

    /// `host:port`, for messages.
    private var endpoint: String { "\(connection.host):\(connection.port)" }

    /// The change as the event message it came in (docs/protocol.md, "Events"), with the observation's
    /// stable `sub`: what `--json` prints and `EventLine` formats.
    private static func message(for change: Change<JSONValue>) -> JSONValue {
        var message: [String: JSONValue] = [
            "event": "change", "sub": change.sub.map(JSONValue.int) ?? .null, "object": .string(change.object),
            "reason": .string(change.reason.wireName), "rev": .int(change.rev),
            "change": change.rawChange ?? .object([:]),
        ]
        // An id-set pattern observation follows no key path.
        if !change.keyPath.isEmpty { message["keyPath"] = .string(change.keyPath) }
        if let cause = change.cause { message["cause"] = .string(cause) }
        return .object(message)
    }
}
