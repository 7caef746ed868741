import ArgumentParser
import KVOServer
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// The kvod daemon: flags, logging, signals; the server does the rest.
@main
struct KVOD: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kvod",
        abstract: "A networked Key-Value Observing server: observe key paths on server-side objects over TCP.")

    @Option(help: "Address to listen on.")
    var host = "127.0.0.1"

    @Option(help: "Port to listen on (0 picks a free port; the bound address is printed on stdout).")
    var port = 7420

    @Option(help: "Log level: trace, debug, info, notice, warning, error or critical.")
    var logLevel = "info"

    @Option(help: "Longest request line in bytes; longer lines are answered too_large.")
    var maxLine = 1 << 20

    @Option(help: "Most bytes queued for one connection before it is closed as too slow.")
    var maxOutputBuffer = 32 << 20

    @Option(help: """
        Most bytes queued for output on all connections together; past it the connections with the most \
        queued (the slowest consumers) are closed first until the rest fit.
        """)
    var maxTotalOutput = 1 << 30

    @Option(help: """
        Most bytes held for unfinished request lines on all connections together; past it the connection \
        holding the largest is closed.
        """)
    var maxTotalInput = 256 << 20

    @Option(help: "Seconds a new connection may take to send its first complete request before it is closed (0: no limit).")
    var firstRequestTimeout: Double = 30

    @Option(help: "Most simultaneous client connections.")
    var maxConnections = 10_000

    @Option(help: "Data directory (created if missing); the objects, revision and history live in kvod.sqlite3 inside.")
    var data = "kvod-data"

    @Flag(help: "Keep everything in memory: nothing is written to disk and all state is lost on exit.")
    var inMemory = false

    @Option(help: """
        When a write is acknowledged: full (fsync per group commit: survives an OS crash or power loss), \
        normal (survives a kvod crash; recent commits may be lost, never corrupted, on power loss), \
        off (survives a kvod crash; no fsync at all: power loss may corrupt the database).
        """)
    var sync = "normal"

    @Option(help: "Revisions of history kept for resuming observations (observe with sinceRev).")
    var history = KVOEngine.defaultHistoryLimit

    @Option(help: "Most bytes of history kept.")
    var historyBytes = KVOEngine.defaultHistoryByteLimit

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be 0...65535") }
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical")
        }
        guard maxLine > 0 else { throw ValidationError("--max-line must be positive") }
        guard maxOutputBuffer > 0 else { throw ValidationError("--max-output-buffer must be positive") }
        guard maxTotalOutput > 0 else { throw ValidationError("--max-total-output must be positive") }
        guard maxTotalInput > 0 else { throw ValidationError("--max-total-input must be positive") }
        guard firstRequestTimeout >= 0, firstRequestTimeout.isFinite, firstRequestTimeout <= 1e9 else {
            throw ValidationError("--first-request-timeout must be 0 or more seconds")
        }
        guard maxConnections > 0 else { throw ValidationError("--max-connections must be positive") }
        guard SyncMode(rawValue: sync) != nil else { throw ValidationError("--sync must be full, normal or off") }
        guard history >= 0, historyBytes >= 0 else { throw ValidationError("--history and --history-bytes must not be negative") }
    }

    func run() throws {
        let level = Logger.Level(rawValue: logLevel)!
        // Every line escaped and bounded: log lines quote ids, key paths and values clients sent.
        LoggingSystem.bootstrap { label in PrintableLogHandler(label: label, level: level) }
        var settings = ServerConfiguration()
        settings.host = host
        settings.port = port
        settings.maximumLineLength = maxLine
        settings.maximumOutputBufferBytes = maxOutputBuffer
        settings.maximumConnections = maxConnections
        settings.maximumTotalOutputBytes = maxTotalOutput
        settings.maximumTotalInputBytes = maxTotalInput
        settings.firstRequestTimeout = firstRequestTimeout
        settings.handlesSignals = true
        settings.historyLimit = history
        settings.historyByteLimit = historyBytes
        if !inMemory {
            settings.storage = StorageConfiguration(directory: data, sync: SyncMode(rawValue: sync)!)
        }
        settings.logger = Logger(label: "kvod")

        let server: Server
        do {
            server = try Server(configuration: settings)
        } catch {
            settings.logger.critical("cannot start: \(error)")
            throw ExitCode(1)
        }
        // The one line on stdout: scripts and tests read the bound port from it.
        print("kvod listening on \(server.address)")
        fflush(nil)  // all output streams: stdout may be a pipe
        let report = server.run()
        if !report.loopClosedCleanly {
            throw ExitCode(70)  // EX_SOFTWARE: a handle leaked
        }
    }
}
