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
        Largest value one write may store, in bytes of compact JSON; larger ones are answered too_large \
        (default: 1 MiB, or --max-object-bytes if smaller).
        """)
    var maxValueBytes: Int?

    @Option(help: """
        Largest object, in bytes of compact JSON; a write that would make an object larger is answered too_large. \
        At most (--max-output-buffer - 65536) / 2, so that an event with an object's old and new value can be sent \
        (default: 15 MiB, or that bound if smaller).
        """)
    var maxObjectBytes: Int?

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

    /// The size limits from the flags, defaults derived from --max-output-buffer.
    var sizeLimits: StoredSizeLimits {
        var limits = StoredSizeLimits.defaults(outputBufferBytes: maxOutputBuffer)
        if let maxObjectBytes {
            limits.maximumObjectBytes = maxObjectBytes
            limits.maximumValueBytes = min(StoredSizeLimits.defaultMaximumValueBytes, maxObjectBytes)
        }
        if let maxValueBytes { limits.maximumValueBytes = maxValueBytes }
        return limits
    }

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be 0...65535") }
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical")
        }
        guard maxLine > 0 else { throw ValidationError("--max-line must be positive") }
        guard maxOutputBuffer > 0 else { throw ValidationError("--max-output-buffer must be positive") }
        if let problem = sizeLimits.problem(outputBufferBytes: maxOutputBuffer) {
            throw ValidationError(problem)
        }
        guard maxConnections > 0 else { throw ValidationError("--max-connections must be positive") }
        guard SyncMode(rawValue: sync) != nil else { throw ValidationError("--sync must be full, normal or off") }
        guard history >= 0, historyBytes >= 0 else { throw ValidationError("--history and --history-bytes must not be negative") }
    }

    func run() throws {
        let level = Logger.Level(rawValue: logLevel)!
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        var settings = ServerConfiguration()
        settings.host = host
        settings.port = port
        settings.maximumLineLength = maxLine
        settings.maximumOutputBufferBytes = maxOutputBuffer
        settings.maximumConnections = maxConnections
        settings.sizeLimits = sizeLimits
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
