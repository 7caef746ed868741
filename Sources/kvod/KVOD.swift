import ArgumentParser
import KVOCommandLine
import KVOEngine
import KVOBuildCommit
import KVOServer
import KVOVersion
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// The kvod daemon: flags, logging, signals; the server does the rest.
@main
struct KVOD: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kvod",
        abstract: "A networked Key-Value Observing server: observe key paths on server-side objects over TCP.",
        discussion: """
            Users: `kvod user add|remove|list|passwd|grant|revoke …` (see `kvod user --help`). \
            Backups: `kvod backup --data DIR FILE` (while kvod runs), `kvod verify FILE` and `kvod restore --data DIR FILE` \
            (kvod stopped).
            """,
        version: KVOD.version)

    /// `kvod --version`: the release and, when the build knows it, the commit (`0.1.0 (abc1234)`).
    static var version: String {
        KVODBuildCommit.hash == KVODBuildCommit.unknown ? KVODVersion.version : "\(KVODVersion.version) (\(KVODBuildCommit.short))"
    }

    @Option(help: "Address to listen on.")
    var host = "127.0.0.1"

    @Option(parsing: .unconditional, help: """
        Port to listen on for plaintext (0 picks a free port; the bound address is printed on stdout), or 'off' for \
        none (then --tls-port is the only listener). \(KVOD.defaultNote(KVOD.defaultPort))
        """, transform: KVOD.listeningPortOrOff)
    var port = KVOD.defaultPort

    /// `--port off`.
    static let portOff = -1

    /// The defaults of the options read with a `transform` (ArgumentParser shows none for those: their help states
    /// it with `defaultNote`, which `OptionCatalog.statedDefault` reads back for the `config` operation).
    static let defaultPort = 7420, defaultMaxLine = 1 << 20, defaultMaxOutputBuffer = 32 << 20, defaultMaxTotalOutput = 1 << 30
    static let defaultMaxTotalInput = 256 << 20, defaultMaxConnections = 10_000
    static let defaultFirstRequestTimeout: Double = 30, defaultLoginTimeout: Double = 60

    /// `(default: VALUE)`, as ArgumentParser writes it in `--help`.
    static func defaultNote(_ value: some CustomStringConvertible) -> String { "(default: \(value))" }

    @Option(parsing: .unconditional, help: """
        Port to listen on for TLS, on --host beside the plaintext --port (0 picks a free port; printed on stdout). \
        Needs --tls-cert and --tls-key. Off when not given.
        """, transform: NumberArgument.listeningPort)
    var tlsPort: Int?

    @Option(help: ArgumentHelp("PEM file with the TLS server certificate (and its intermediates); reloaded on SIGHUP.",
                               valueName: "file"))
    var tlsCert: String?

    @Option(help: ArgumentHelp("PEM file with the TLS certificate's private key (unencrypted); reloaded on SIGHUP.",
                               valueName: "file"))
    var tlsKey: String?

    @Option(help: ArgumentHelp("""
        PEM file with the certificate authorities client certificates are verified against (for \
        --tls-client-auth optional or require); reloaded on SIGHUP.
        """, valueName: "file"))
    var tlsCa: String?

    @Option(help: """
        Client certificates on the TLS port: none (not asked for), optional (a client may present one; it must \
        verify against --tls-ca), require (every client must present one that verifies). A verified certificate's \
        subject CN names the kvod user the connection is.
        """)
    var tlsClientAuth = "none"

    @Option(parsing: .unconditional, help: "Seconds a TLS client may take to finish its handshake before it is closed (0: no limit). \(KVOD.defaultNote(TLSConfiguration.defaultHandshakeTimeout))",
            transform: NumberArgument.seconds)
    var tlsHandshakeTimeout: Double = TLSConfiguration.defaultHandshakeTimeout

    @Option(parsing: .unconditional, help: """
        Port for HTTP: WebSocket clients at /ws (the same protocol, one JSON message per text frame), Prometheus \
        metrics at /metrics, /healthz and /readyz (0 picks a free port; printed on stdout). Off when not given.
        """, transform: NumberArgument.listeningPort)
    var httpPort: Int?

    @Option(help: "Address the HTTP listener binds (loopback by default; elsewhere, with users defined, /metrics needs a server admin's API token).")
    var httpHost = "127.0.0.1"

    @Option(help: ArgumentHelp("""
        An Origin allowed to open a WebSocket at /ws (repeatable; exact, e.g. https://app.example.com; '*' for any). \
        Requests without Origin (non-browser clients) and pages served by kvod itself are always allowed.
        """, valueName: "origin"))
    var httpAllowedOrigin: [String] = []

    @Option(help: ArgumentHelp("""
        A host name the HTTP listener answers to (repeatable, e.g. kvod.example.com). Requests whose Host is \
        not an IP address, localhost or such a name get 421 (a defence against DNS rebinding); also needed \
        for a health check or a browser that reaches kvod by a DNS name.
        """, valueName: "name"))
    var httpAllowedHost: [String] = []

    @Flag(help: "The HTTP listener speaks TLS (https://, wss://) with --tls-cert and --tls-key (needs --tls-port).")
    var httpTLS = false

    @Option(help: ArgumentHelp("""
        Also listen on a Unix-domain socket at this path (JSON lines, as on --port; local clients only, so it \
        counts as loopback). A stale socket file there is replaced, a live one refused; removed on a clean stop.
        """, valueName: "path"))
    var unix: String?

    @Option(help: ArgumentHelp("Permission bits of the --unix socket file, in octal (0600: only kvod's user may connect).",
                               valueName: "mode"))
    var unixMode: String?

    /// `--unix-mode`'s bits (0o600 when not given); nil when it is no octal mode.
    var unixModeBits: UInt32? {
        guard let unixMode else { return 0o600 }
        guard let bits = UInt32(unixMode, radix: 8), bits <= 0o777 else { return nil }
        return bits
    }

    /// `--port`'s value: a listening port, or `portOff` for "off".
    static func listeningPortOrOff(_ text: String) throws(NumberArgument.Invalid) -> Int {
        if text == "off" { return portOff }
        do {
            return try NumberArgument.listeningPort(text)
        } catch {
            throw NumberArgument.Invalid(description: "\(error.description) (or 'off')")
        }
    }

    /// The TLS settings from the flags; nil without --tls-port.
    var tlsConfiguration: TLSConfiguration? {
        guard let tlsPort, let tlsCert, let tlsKey else { return nil }
        return TLSConfiguration(
            port: tlsPort, certificatePath: tlsCert, privateKeyPath: tlsKey, certificateAuthorityPath: tlsCa,
            clientAuthentication: TLSConfiguration.ClientAuthentication(rawValue: tlsClientAuth) ?? .none,
            handshakeTimeout: tlsHandshakeTimeout)
    }

    @Option(help: "Log level: trace, debug, info, notice, warning, error or critical.")
    var logLevel = "info"

    @Option(help: "Log format on standard error: text (one line a record) or json (one JSON object a line, for log shippers).")
    var logFormat = "text"

    @Option(help: ArgumentHelp("""
        Settings file: one 'name = value' a line, each name a flag of kvod's without the leading --; \
        KVOD_<NAME> environment variables (KVOD_MAX_CONNECTIONS) set flags too. Flags win over the environment, \
        the environment over the file. SIGHUP reads it again and applies limits, log level and TLS files.
        """, valueName: "file"))
    var config: String?

    @Flag(help: """
        Check the settings and exit: print those from the config file and the environment, with where each came \
        from, and exit 0 when kvod would start with them (64 for a mistake in the file or environment, 2 on the \
        command line).
        """)
    var checkConfig = false

    @Option(parsing: .unconditional, help: "Longest request line in bytes; longer lines are answered too_large. \(KVOD.defaultNote(KVOD.defaultMaxLine))",
            transform: NumberArgument.positive)
    var maxLine = KVOD.defaultMaxLine

    @Option(parsing: .unconditional, help: "Most bytes queued for one connection before it is closed as too slow. \(KVOD.defaultNote(KVOD.defaultMaxOutputBuffer))",
            transform: NumberArgument.positive)
    var maxOutputBuffer = KVOD.defaultMaxOutputBuffer

    @Option(parsing: .unconditional, help: """
        Most bytes queued for output on all connections together; past it the connections with the most \
        queued (the slowest consumers) are closed first until the rest fit. \(KVOD.defaultNote(KVOD.defaultMaxTotalOutput))
        """, transform: NumberArgument.positive)
    var maxTotalOutput = KVOD.defaultMaxTotalOutput

    @Option(parsing: .unconditional, help: """
        Most bytes held for unfinished request lines on all connections together; past it the connection \
        holding the largest is closed. \(KVOD.defaultNote(KVOD.defaultMaxTotalInput))
        """, transform: NumberArgument.positive)
    var maxTotalInput = KVOD.defaultMaxTotalInput

    @Option(parsing: .unconditional,
            help: "Seconds a new connection may take to send its first complete request before it is closed (0: no limit). \(KVOD.defaultNote(KVOD.defaultFirstRequestTimeout))",
            transform: NumberArgument.seconds)
    var firstRequestTimeout = KVOD.defaultFirstRequestTimeout

    @Option(parsing: .unconditional, help: """
        Seconds a connection may send nothing at all (no request, no answer to a heartbeat, no WebSocket pong) \
        before it is closed; quiet for half of it, it gets a heartbeat ({"event":"heartbeat"}, a WebSocket ping). \
        TCP keepalive and TCP_USER_TIMEOUT follow it (0: no limit; TCP's checks then take 120 s). \(KVOD.defaultNote(ServerConfiguration.defaultIdleTimeout))
        """, transform: NumberArgument.seconds)
    var idleTimeout = ServerConfiguration.defaultIdleTimeout

    @Option(parsing: .unconditional,
            help: "With users defined: seconds a new connection may take to log in before it is closed (0: no limit). \(KVOD.defaultNote(KVOD.defaultLoginTimeout))",
            transform: NumberArgument.seconds)
    var loginTimeout = KVOD.defaultLoginTimeout

    @Option(parsing: .unconditional, help: """
        Milliseconds of the event loop's time (fractions allowed) from which a request's handling, or a loop \
        iteration's work, is kept in the slow-request log (kvoclient slow) and counted (kvod_slow_requests_total, \
        kvod_loop_stalls_total); 0 keeps every request (default: 10).
        """, transform: NumberArgument.milliseconds)
    var slowRequest: Double = ServerConfiguration.defaultSlowRequestMilliseconds

    @Option(parsing: .unconditional, help: """
        Largest value one write may store, in bytes of compact JSON; larger ones are answered too_large \
        (default: 1 MiB, or --max-object-bytes if smaller).
        """, transform: NumberArgument.positive)
    var maxValueBytes: Int?

    @Option(parsing: .unconditional, help: """
        Largest object, in bytes of compact JSON; a write that would make an object larger is answered too_large. \
        At most (--max-output-buffer - 65536) / 2, so that an event with an object's old and new value can be sent \
        (default: 15 MiB, or that bound if smaller).
        """, transform: NumberArgument.positive)
    var maxObjectBytes: Int?

    @Option(parsing: .unconditional, help: """
        Most bytes everything stored may add up to (each object's id and compact JSON, class and binding \
        definitions); past it, writes that would grow the store are answered quota_exceeded, while reads, \
        observations, deletes and writes that do not grow it keep working (0: no limit). \(KVOD.defaultNote(0))
        """, transform: NumberArgument.nonNegative)
    var maxMemory = 0

    @Option(parsing: .unconditional, help: "Most simultaneous client connections. \(KVOD.defaultNote(KVOD.defaultMaxConnections))",
            transform: NumberArgument.positive)
    var maxConnections = KVOD.defaultMaxConnections

    @Option(parsing: .unconditional, help: """
        Most observations one connection may hold; observe past it is answered too_many_observations. \
        \(KVOD.defaultNote(KVOEngine.defaultMaximumObservationsPerConnection))
        """, transform: NumberArgument.positive)
    var maxObservationsPerConnection = KVOEngine.defaultMaximumObservationsPerConnection

    @Option(parsing: .unconditional, help: """
        Most replies one connection may have waiting to be written to its socket (a client pipelining \
        requests without reading the replies); with that many, kvod stops reading the connection until \
        they drain: back-pressure, never a close. \(KVOD.defaultNote(ServerConfiguration.defaultMaximumPendingRequests))
        """, transform: NumberArgument.positive)
    var maxPendingRequests = ServerConfiguration.defaultMaximumPendingRequests

    /// nil when not given: `kvod-data`, unless `--in-memory`.
    @Option(help: ArgumentHelp(
        "Data directory (created if missing); the objects, revision and history live in kvod.sqlite3 inside. (default: \(KVOD.defaultDataDirectory))",
        valueName: "directory"))
    var data: String?

    /// The data directory when `--data` is not given.
    static let defaultDataDirectory = "kvod-data"

    @Flag(name: .customLong("init"), help: """
        Start with a new, empty database where the data directory held one that is now missing or empty (without \
        it kvod refuses: a failed restore must not look like an empty server). Changes nothing otherwise.
        """)
    var replacesLostDatabase = false

    @Flag(help: "Keep everything in memory: nothing is written to disk and all state is lost on exit.")
    var inMemory = false

    @Option(help: ArgumentHelp("""
        With --in-memory: the users file (made by `kvod user add --users FILE`); with users, clients must \
        authenticate (auth) before anything but hello and ping.
        """, valueName: "file"))
    var users: String?

    @Flag(help: """
        Serve without authentication on a non-loopback address when no users are defined (anyone who can \
        connect may read and change everything). Without it kvod refuses to start there.
        """)
    var insecureOpen = false

    @Option(help: """
        When a write is acknowledged: full (fsync per group commit: survives an OS crash or power loss), \
        normal (survives a kvod crash; recent commits may be lost, never corrupted, on power loss), \
        off (survives a kvod crash; no fsync at all: power loss may corrupt the database).
        """)
    var sync = "normal"

    @Option(parsing: .unconditional, help: "Revisions of history kept for resuming observations (observe with sinceRev). \(KVOD.defaultNote(KVOEngine.defaultHistoryLimit))",
            transform: NumberArgument.nonNegative)
    var history = KVOEngine.defaultHistoryLimit

    @Option(parsing: .unconditional, help: "Most bytes of history kept. \(KVOD.defaultNote(KVOEngine.defaultHistoryByteLimit))", transform: NumberArgument.nonNegative)
    var historyBytes = KVOEngine.defaultHistoryByteLimit

    @Option(parsing: .unconditional, help: """
        Hard bound on the SQLite WAL in bytes (at least 65536). Checkpoints run off the event loop from 1/16 of \
        it; past it one runs on the event loop, blocking, until the WAL is empty. \(KVOD.defaultNote(SQLiteStore.defaultWALLimitBytes))
        """, transform: NumberArgument.positive)
    var walLimit = SQLiteStore.defaultWALLimitBytes

    @Option(parsing: .unconditional, help: """
        Most bytes the database and its WAL may take on disk (--data); past it writes are refused (storage_full) \
        while reads and observations go on, until the files are below it again (0: no limit). \(KVOD.defaultNote(0))
        """, transform: NumberArgument.nonNegative)
    var maxDisk = 0

    @Option(parsing: .unconditional, help: """
        Bytes held in reserve on the data directory's file system (the file kvod.reserve), given back when the \
        disk fills so that the writes in progress are still stored; writes are then refused (storage_full) until \
        the reserve can be made again (default: 64 MiB, at most 1/20 of the file system; 0: none).
        """, transform: NumberArgument.nonNegative)
    var diskReserve: Int?

    @Option(help: ArgumentHelp("""
        Cluster mode: the NATS servers (JetStream), comma-separated (nats://127.0.0.1:4222,nats://...). \
        Writes are appended to a stream that every node applies in order; reads and observations stay local.
        """, valueName: "urls"))
    var cluster: String?

    @Option(help: "With --cluster: the JetStream stream of the writes (created with 3 replicas when missing).")
    var clusterStream = "kvod"

    @Option(help: "With --cluster: this node's name, unique in the cluster (letters, digits, '-', '_').")
    var node: String?

    @Option(parsing: .unconditional, help: """
        With --cluster: seconds a write may wait to be appended to the stream and applied before it is \
        answered unavailable.
        """)
    var clusterWriteTimeout: Double = 5

    @Option(help: """
        With --cluster: snapshot the state after every N stream entries (0: never), kept in the stream \
        <stream>_SNAP; new nodes start from the newest one, and the stream is trimmed behind them.
        """)
    var clusterSnapshotEvery: Int = Int(ClusterConfiguration.defaultSnapshotEvery)

    @Option(help: """
        With --cluster: after every N stream entries (at least 16), each node publishes a checkpoint of its running \
        hash over what it applied, and a node whose hash differs from the majority's stops taking writes and \
        repairs itself.
        """)
    var clusterCheckpointEvery: Int = Int(ClusterConfiguration.defaultCheckpointEvery)

    /// The cluster settings from the flags; nil without --cluster.
    var clusterConfiguration: ClusterConfiguration? {
        guard let cluster else { return nil }
        let servers = cluster.split(separator: ",").map { String($0.filter { $0 != " " }) }.filter { !$0.isEmpty }
        return ClusterConfiguration(servers: servers, stream: clusterStream, node: node ?? "", writeTimeout: clusterWriteTimeout,
                                    snapshotEvery: UInt64(max(0, clusterSnapshotEvery)),
                                    checkpointEvery: UInt64(max(0, clusterCheckpointEvery)))
    }

    /// The size limits from the flags, defaults derived from --max-output-buffer.
    var sizeLimits: StoredSizeLimits {
        var limits = StoredSizeLimits.defaults(outputBufferBytes: maxOutputBuffer)
        if let maxObjectBytes {
            limits.maximumObjectBytes = maxObjectBytes
            limits.maximumValueBytes = min(StoredSizeLimits.defaultMaximumValueBytes, maxObjectBytes)
        }
        if let maxValueBytes { limits.maximumValueBytes = maxValueBytes }
        limits.maximumStoredBytes = maxMemory == 0 ? .max : maxMemory
        return limits
    }

    /// Parses the flags and runs, with usage errors as one `kvod: error:` line and the usage, exit 2.
    static func main() {
        if CommandLine.arguments.count > 1, CommandLine.arguments[1] == "user" {
            // `kvod user …`: every error is `kvod user: error: …` (usage errors with the usage, exit 2;
            // failures such as an unknown user, exit 1), never ArgumentParser's bare `Error: …`.
            do {
                var command = try UserCommand.parseAsRoot(Array(CommandLine.arguments.dropFirst(2)))
                try command.run()
                exitProcess(0)
            } catch {
                exitReporting(error, of: UserCommand.self, program: "kvod user")
            }
        }
        if CommandLine.arguments.count > 1, ["backup", "restore", "verify"].contains(CommandLine.arguments[1]) {
            // `kvod backup …`, `kvod restore …` and `kvod verify …`: errors as for `kvod user`.
            let name = CommandLine.arguments[1]
            let type: any ParsableCommand.Type = switch name {
            case "backup": BackupCommand.self
            case "restore": RestoreCommand.self
            default: VerifyCommand.self
            }
            do {
                var command = try type.parseAsRoot(Array(CommandLine.arguments.dropFirst(2)))
                try command.run()
                exitProcess(0)
            } catch {
                exitReporting(error, of: type, program: "kvod \(name)")
            }
        }
        // The config file and KVOD_… variables, as arguments before the command line's (ConfigurationLayers).
        let commandLine = Array(CommandLine.arguments.dropFirst())
        let environment = ConfigurationReloader.processEnvironment()
        // Under --log-format json (wherever it is set), the errors below are JSON lines too (`ErrorLine`).
        var json = ErrorLine.logsJSON(commandLine, environment: environment)
        let layers: ConfigurationLayers
        do {
            layers = try ConfigurationLayers(commandLine: commandLine, environment: environment)
        } catch {
            exitReporting(configurationError: error, json: json)
        }
        json = ErrorLine.logsJSON(layers.arguments, environment: [:])
        do {
            var command = try parseAsRoot(layers.arguments)
            guard let kvod = command as? KVOD else { return try command.run() }
            if kvod.checkConfig {
                // An unknown KVOD_… variable, only a warning at start-up, fails the check.
                if let problem = layers.environmentCheck.problems.first { exitReporting(problem: problem, json: json) }
                return print(layers.report, terminator: "")
            }
            try kvod.run(commandLine: commandLine, layers: layers)
        } catch {
            let sources = layers.sources(mentionedIn: message(for: error))
            if !sources.isEmpty, exitCode(for: error) != .success {
                exitReporting(configurationError: .refused(message: message(for: error), sources: sources), json: json)
            }
            exitReporting(error, of: KVOD.self, program: "kvod", json: json)
        }
    }

    func run() throws {
        try run(commandLine: [], layers: nil)
    }

    /// Runs with the settings `layers` added to `commandLine`; a SIGHUP reads them again (`ConfigurationReloader`).
    func run(commandLine: [String], layers: ConfigurationLayers?) throws {
        let level = LogLevelSetting(Logger.Level(rawValue: logLevel)!)
        // Every line escaped and bounded: log lines quote ids, key paths and values clients sent.
        let json = logFormat == "json"
        LoggingSystem.bootstrap { label -> any LogHandler in
            json ? JSONLogHandler(label: label, level: level) : PrintableLogHandler(label: label, level: level)
        }
        let logger = Logger(label: "kvod")
        for problem in layers?.environmentCheck.problems ?? [] { logger.warning("\(problem)") }
        if let path = layers?.configPath {
            logger.info("configuration", metadata: ["file": "\(path)", "settings": "\(layers?.settings.count ?? 0)"])
        }
        checkDescriptorLimit(logger)
        var settings = serverConfiguration(logger: logger)
        var reloader: ConfigurationReloader?
        if let layers {
            let made = ConfigurationReloader(commandLine: commandLine, layers: layers, level: level, logger: logger)
            settings.reload = { try made.reload() }
            settings.settingsInForce = made.inForce.settings
            reloader = made
        }
        try serve(settings, reloader: reloader)
    }

    /// The server's settings from the flags.
    func serverConfiguration(logger: Logger) -> ServerConfiguration {
        var settings = ServerConfiguration()
        settings.buildCommit = KVODBuildCommit.hash
        settings.host = host
        settings.port = max(port, 0)
        settings.listensForPlaintext = port != KVOD.portOff
        settings.tls = tlsConfiguration
        if let httpPort {
            settings.http = HTTPConfiguration(port: httpPort, host: httpHost, allowedOrigins: httpAllowedOrigin,
                                          allowedHosts: httpAllowedHost, usesTLS: httpTLS)
        }
        if let unix { settings.unixSocket = UnixSocketConfiguration(path: unix, mode: unixModeBits ?? 0o600) }
        settings.maximumLineLength = maxLine
        settings.maximumOutputBufferBytes = maxOutputBuffer
        settings.maximumConnections = maxConnections
        settings.maximumObservationsPerConnection = maxObservationsPerConnection
        settings.maximumPendingRequests = maxPendingRequests
        settings.maximumTotalOutputBytes = maxTotalOutput
        settings.maximumTotalInputBytes = maxTotalInput
        settings.firstRequestTimeout = firstRequestTimeout
        settings.loginTimeout = loginTimeout
        settings.idleTimeout = idleTimeout
        settings.slowRequestMilliseconds = slowRequest
        settings.sizeLimits = sizeLimits
        settings.handlesSignals = true
        settings.historyLimit = history
        settings.historyByteLimit = historyBytes
        if !inMemory {
            // KVOD_TEST_CHECKPOINT_DELAY_MS: tests of the blocking WAL fallback only (docs/design.md).
            let checkpointDelay = getenv("KVOD_TEST_CHECKPOINT_DELAY_MS").flatMap { Int(String(cString: $0)) } ?? 0
            settings.storage = StorageConfiguration(directory: data ?? KVOD.defaultDataDirectory, sync: SyncMode(rawValue: sync)!,
                                                    walLimitBytes: walLimit, checkpointTestDelayMilliseconds: checkpointDelay)
            settings.storage?.reserveBytes = diskReserve
            settings.storage?.maximumDiskBytes = maxDisk
            settings.storage?.replacesLostDatabase = replacesLostDatabase
            // KVOD_GROUP_COMMIT_INTERVAL_US: measurements of the group commit cadence (docs/performance.md, issue 28).
            if let interval = getenv("KVOD_GROUP_COMMIT_INTERVAL_US").flatMap({ Int(String(cString: $0)) }), interval >= 0 {
                settings.storage?.groupCommitIntervalMicroseconds = interval
            }
        }
        settings.usersFile = users
        settings.cluster = clusterConfiguration
        settings.allowsInsecureOpen = insecureOpen
        settings.logger = logger
        return settings
    }

    /// Starts the server, prints where it listens and serves until it stops.
    private func serve(_ settings: ServerConfiguration, reloader: ConfigurationReloader?) throws {
        let server: Server
        do {
            server = try Server(configuration: settings)
        } catch {
            settings.logger.critical("cannot start: \(error)")
            throw ExitCode(1)
        }
        // The lines on stdout: scripts and tests read the bound ports from them (the plaintext one first).
        if settings.listensForPlaintext { print("kvod listening on \(server.address)") }
        if let tlsAddress = server.tlsAddress { print("kvod listening for TLS on \(tlsAddress)") }
        if let httpAddress = server.httpAddress { print("kvod listening for HTTP on \(httpAddress)") }
        if let unixAddress = server.unixAddress { print("kvod listening on \(unixAddress)") }
        fflush(nil)  // all output streams: stdout may be a pipe
        reloader?.boundPorts = ["port": server.port, "tls-port": server.tlsPort, "http-port": server.httpPort].filter { $0.value != 0 }
        let report = server.run()
        if !report.loopClosedCleanly {
            throw ExitCode(70)  // EX_SOFTWARE: a handle leaked
        }
    }

    static func exitProcess(_ code: Int32) -> Never {
        #if canImport(Glibc)
        Glibc.exit(code)
        #else
        Darwin.exit(code)
        #endif
    }

    /// Raises the open-file limit's soft value toward what --max-connections needs (as far as the hard
    /// limit allows), and says at start-up when it still falls short: connections past it would be
    /// refused (the server logs those, once a second at most).
    private func checkDescriptorLimit(_ logger: Logger) {
        let limit = DescriptorLimit.raise(forConnections: maxConnections)
        if let before = limit.raisedFrom {
            logger.info("raised the open-file limit (ulimit -n) from \(before) to \(limit.soft) for --max-connections \(maxConnections)")
        }
        guard limit.connectionCapacity < maxConnections else { return }
        logger.warning("""
            the open-file limit (ulimit -n) is \(limit.soft), hard limit \(limit.hard): room for \
            \(limit.connectionCapacity) connections, fewer than --max-connections \(maxConnections) \
            (kvod keeps \(DescriptorLimit.reserved) descriptors for itself); connections past it will be refused: \
            raise the limit to \(DescriptorLimit.needed(forConnections: maxConnections)) or lower --max-connections
            """)
    }
}
