#if canImport(Glibc)
import Glibc
#endif
import KVOServer

/// The network benchmarks of issue 5: kvod against Redis pub/sub over loopback TCP, each run with a fresh
/// server process started (and stopped) here. See docs/performance.md and scripts/bench.sh.
///
///     kvod-bench throughput [--server kvod|redis|both] [--subscribers 100] [--bytes 64] [--shape string]
///                           [--sync in-memory|off|normal|full] [--fault skip|duplicate|reorder] [--perf FILE]
///                           [--events full|compact|full,compact]   (kvod once per encoding listed)
///     kvod-bench latency    [--server both] [--rate 10000] [--subscribers 100] [--bytes 64] [--warmup 1] [--sync …]
///                           [--events full|compact]
///     kvod-bench scale      [--server both] [--connections 10000,100] [--observations 1,1000]   (pairs)
///     kvod-bench spread     [--server both] [--objects 100000] [--subscribers 10] [--bytes 64]
///     kvod-bench durable    [--subscribers 10] [--bytes 64]          (kvod in-memory, --sync normal, full)
///     kvod-bench matrix     [--subscribers 1,10,100] [--bytes 64,1024] [--rate 10000]
///                           [--shapes string-id,object3-id,object10-id,object3-id-nested] [--shape-bytes 64]
///                           [--latency-subscribers 100] [--latency-bytes 64]       (throughput, then latency)
///                           [--events full|compact]   (the encoding kvod's subscribers ask for; default full)
///     kvod-bench all        [matrix options] [--connections ..] [--observations ..] [--objects ..]
///                           [--spread-subscribers 10] [--durable-subscribers 10] [--quick]
///     kvod-bench selftest   [--server both] [--events full,compact]
///                           (the checkers must catch a skipped, a duplicated and a reordered set; kvod in both encodings)
///     kvod-bench permissions [--subscribers 1] [--bytes 64] [--globs 100]
///                           (sets/s in open mode and as an authenticated user with that many glob rules, runs alternating)
///
/// Every command also takes `--seconds 5` (each timed run), `--runs 1` (runs per figure, the best one
/// reported; scale always runs once), `--window 1024` and `--lag 4096` (pipelining
/// bounds, see `Options.pipelining`), `--kvod PATH` and `--redis PATH` (default: the kvod next to
/// kvod-bench, and redis-server on the PATH), `--perf-command PATH` and `--markdown FILE` (also write the
/// report there). `all --quick` shrinks scale and spread for a smoke run. Figures are printed, never
/// asserted; the exit status is 1 when a run lost, reordered or duplicated a delivery, got an error reply
/// or lost a connection (or a selftest fault went unnoticed), and 2 for a usage error.
enum NetworkBenchmark {
    static let commands: Set<String> = ["throughput", "latency", "scale", "spread", "durable", "matrix", "all", "selftest",
                                        "permissions"]

    static func main(command: String, arguments: [String]) -> Never {
        let options = Options(arguments, allowed: allowedOptions(command))
        let context = Context(options: options, command: command)
        switch command {
        case "throughput": throughput(context, options)
        case "latency": latency(context, options, prefix: "")
        case "scale": scale(context, options)
        case "spread": spread(context, options, prefix: "")
        case "durable": durable(context, options, prefix: "")
        case "matrix":
            matrix(context, options)
            latency(context, options, prefix: "latency-")
        case "all":
            let quick = options.flag("quick")
            matrix(context, options)
            latency(context, options, prefix: "latency-")
            scale(context, options, defaults: quick ? [(1_000, 1), (10, 100)] : [(10_000, 1), (100, 1_000)])
            spread(context, options, prefix: "spread-", defaultObjects: quick ? 10_000 : 100_000)
            durable(context, options, prefix: "durable-")
        case "selftest": selftest(context, options)
        case "permissions": permissions(context, options)
        default: usage()
        }
        context.finish()
    }

    /// The options each command takes. Inside `matrix` and `all`, `--subscribers` and `--bytes` are the
    /// matrix's lists, and the other workloads' sizes take a prefix (`--latency-subscribers`, ...).
    static func allowedOptions(_ command: String) -> Set<String> {
        let common: Set<String> = ["kvod", "redis", "perf-command", "markdown", "seconds", "runs", "window", "lag", "server"]
        switch command {
        case "throughput": return common.union(["subscribers", "bytes", "sync", "fault", "perf", "shape", "events"])
        case "latency": return common.union(["subscribers", "bytes", "rate", "warmup", "sync", "events"])
        case "scale": return common.union(["connections", "observations"])
        case "spread": return common.union(["subscribers", "bytes", "objects"])
        case "durable": return common.union(["subscribers", "bytes"])
        case "matrix": return common.union(["subscribers", "bytes", "rate", "warmup", "latency-subscribers", "latency-bytes",
                                            "shapes", "shape-bytes", "events"])
        case "all":
            return common.union(["subscribers", "bytes", "rate", "warmup", "latency-subscribers", "latency-bytes", "quick",
                                 "shapes", "shape-bytes", "events",
                                 "connections", "observations", "objects", "spread-subscribers", "spread-bytes",
                                 "durable-subscribers", "durable-bytes"])
        case "selftest": return common.union(["events"])
        case "permissions": return common.union(["subscribers", "bytes", "globs"])
        default: usage()
        }
    }

    // MARK: Commands

    static func throughput(_ context: Context, _ options: Options) {
        let servers = options.servers()
        let subscribers = options.int("subscribers", 100)
        let bytes = options.int("bytes", 64)
        let storage = options.storage()
        let shape = options.shapes(fallback: [.plainString])[0]
        let pace = options.pipelined()
        let fault = options.string("fault").map { name -> FanOutRun.Fault in
            guard let fault = FanOutRun.Fault(rawValue: name) else { usage("unknown fault '\(name)'") }
            return fault
        }
        let perfOutput = options.string("perf")
        let encodings = options.eventEncodings()
        // kvod once per encoding asked for (`--events full,compact`), then Redis.
        let runs: [(ServerKind, EventEncoding)] = servers.map { $0 == .kvod(.inMemory) ? .kvod(storage) : $0 }.flatMap { kind in
            kind == .redis ? [(kind, .full)] : encodings.map { (kind, $0) }
        }
        let results = runs.map { kind, events in
            context.measure(kind, best: higherDeliveries) { server in
                let profile = perfOutput.map { (perf: context.executables.perf,
                                                output: kind == .redis ? $0 + ".redis" : events == .compact ? $0 + ".compact" : $0) }
                return FanOutRun.run(server: server, subscribers: subscribers, payloadLength: shape.bytes(forRequested: bytes),
                                     shape: shape, seconds: context.seconds, pace: pace, fault: fault, profile: profile,
                                     events: events)
            }
        }
        context.report.addThroughput(results, title: "Throughput: \(subscribers) subscribers, \(bytes)-byte values")
    }

    /// Issue 11's row: what permission checks cost per set. The same pipelined workload against kvod in
    /// open mode and against kvod where every connection authenticates as a user whose rules are
    /// `--globs` globs (the one matching the object last), runs alternating so that the machine's noise
    /// falls on both alike; the best of `--runs` of each.
    static func permissions(_ context: Context, _ options: Options) {
        let subscribers = options.int("subscribers", 1)
        let bytes = options.int("bytes", 64)
        let globs = options.int("globs", 100)
        let pace = options.pipelined()
        var best: [FanOutResult?] = [nil, nil]
        for _ in 0..<context.runs {
            for (index, kind) in [ServerKind.kvod(.inMemory), .kvod(.inMemoryWithUser(globs: globs))].enumerated() {
                let result = context.measure(kind, runs: 1, best: higherSets) { server in
                    FanOutRun.run(server: server, subscribers: subscribers, payloadLength: bytes, seconds: context.seconds,
                                  pace: pace)
                }
                if best[index].map({ higherSets(result, $0) }) ?? true { best[index] = result }
            }
        }
        context.report.addPermissionCost(open: best[0]!, restricted: best[1]!, globs: globs, runs: context.runs)
    }

    private static func higherSets(_ a: FanOutResult, _ b: FanOutResult) -> Bool {
        a.setsPerSecond > b.setsPerSecond
    }

    static func matrix(_ context: Context, _ options: Options) {
        let subscriberCounts = options.intList("subscribers", [1, 10, 100])
        let byteCounts = options.intList("bytes", [64, 1024])
        let pace = options.pipelined()
        let events = options.eventEncoding()
        var rows: [(kvod: FanOutResult, redis: FanOutResult)] = []
        for subscribers in subscriberCounts {
            for bytes in byteCounts {
                let pair = [ServerKind.kvod(.inMemory), .redis].map { kind in
                    context.measure(kind, best: higherDeliveries) { server in
                        FanOutRun.run(server: server, subscribers: subscribers, payloadLength: bytes,
                                      seconds: context.seconds, pace: pace, events: events)
                    }
                }
                rows.append((pair[0], pair[1]))
            }
        }
        context.report.addMatrix(rows, seconds: context.seconds, runs: context.runs, pace: pace)
        // `all --quick` (the CI smoke): every shape once, at the first subscriber count only.
        shapeMatrix(context, options, subscriberCounts: options.flag("quick") ? [subscriberCounts[0]] : subscriberCounts)
    }

    /// Issue 13's cells: for each subscriber count, each `--shapes` shape at `--shape-bytes` (raised to the
    /// shape's minimum: a ten-member object needs 110), kvod and Redis in turn.
    static func shapeMatrix(_ context: Context, _ options: Options, subscriberCounts: [Int]) {
        let shapes = options.shapes()
        let requestedBytes = options.int("shape-bytes", 64)
        let pace = options.pipelined()
        let events = options.eventEncoding()
        var rows: [(kvod: FanOutResult, redis: FanOutResult)] = []
        for subscribers in subscriberCounts {
            for shape in shapes {
                let bytes = shape.bytes(forRequested: requestedBytes)
                let pair = [ServerKind.kvod(.inMemory), .redis].map { kind in
                    context.measure(kind, best: higherSets) { server in
                        FanOutRun.run(server: server, subscribers: subscribers, payloadLength: bytes, shape: shape,
                                      seconds: context.seconds, pace: pace, events: events)
                    }
                }
                rows.append((pair[0], pair[1]))
            }
        }
        context.report.addShapeMatrix(rows, seconds: context.seconds, runs: context.runs, pace: pace)
    }

    static func latency(_ context: Context, _ options: Options, prefix: String) {
        let rate = options.int("rate", 10_000)
        let subscribers = options.int(prefix + "subscribers", 100)
        let bytes = options.int(prefix + "bytes", 64)
        let warmup = options.double("warmup", min(1, context.seconds / 5))
        let storage = options.storage()
        let events = options.eventEncoding()
        let results = options.servers().map { $0 == .kvod(.inMemory) ? .kvod(storage) : $0 }.map { kind in
            context.measure(kind, best: { $0.latency.percentile(50) < $1.latency.percentile(50) }) { server in
                FanOutRun.run(server: server, subscribers: subscribers, payloadLength: bytes,
                              seconds: context.seconds + warmup, pace: .fixedRate(perSecond: rate), warmupSeconds: warmup,
                              events: events)
            }
        }
        context.report.addLatency(results, rate: rate, seconds: context.seconds, warmup: warmup, runs: context.runs)
    }

    static func scale(_ context: Context, _ options: Options, defaults: [(Int, Int)] = [(10_000, 1), (100, 1_000)]) {
        let servers = options.servers()
        let connections = options.intList("connections", defaults.map { $0.0 })
        let observations = options.intList("observations", defaults.map { $0.1 })
        guard connections.count == observations.count else {
            usage("--connections and --observations need the same number of values (pairs)")
        }
        var results: [ScaleResult] = []
        for (connectionCount, observationCount) in zip(connections, observations) {
            for kind in servers {
                // Memory does not need best-of-N: one run each.
                results.append(context.measure(kind, maxConnections: connectionCount > 10_000 ? connectionCount + 16 : nil,
                                               runs: 1, best: { _, _ in false }) { server in
                    ScaleRun.run(server: server, connections: connectionCount, observationsPerConnection: observationCount)
                })
            }
        }
        context.report.addScale(results)
    }

    static func spread(_ context: Context, _ options: Options, prefix: String, defaultObjects: Int = 100_000) {
        let objects = options.int("objects", defaultObjects)
        let subscribers = options.int(prefix + "subscribers", 10)
        let bytes = options.int(prefix + "bytes", 64)
        let (window, lag) = options.pipelining()
        let results = options.servers().map { kind in
            context.measure(kind, best: { $0.deliveriesPerSecond > $1.deliveriesPerSecond }) { server in
                SpreadRun.run(server: server, objects: objects, subscribers: subscribers, payloadLength: bytes,
                              seconds: context.seconds, window: window, lag: lag)
            }
        }
        context.report.addSpread(results, bytes: bytes, runs: context.runs)
    }

    static func durable(_ context: Context, _ options: Options, prefix: String) {
        let subscribers = options.int(prefix + "subscribers", 10)
        let bytes = options.int(prefix + "bytes", 64)
        let pace = options.pipelined()
        let results = [KVODStorage.inMemory, .durable(sync: "normal"), .durable(sync: "full")].map { storage in
            context.measure(.kvod(storage), best: higherDeliveries) { server in
                FanOutRun.run(server: server, subscribers: subscribers, payloadLength: bytes, seconds: context.seconds, pace: pace)
            }
        }
        context.report.addDurable(results, subscribers: subscribers, bytes: bytes, runs: context.runs)
    }

    private static func higherDeliveries(_ a: FanOutResult, _ b: FanOutResult) -> Bool {
        a.deliveriesPerSecond > b.deliveriesPerSecond
    }

    /// Proves that the counters can fail: for each fault, on each server, every subscriber must count
    /// exactly one lost, duplicate or reordered delivery, and a clean run none.
    static func selftest(_ context: Context, _ options: Options) {
        let subscribers = 3
        let seconds = min(context.seconds, 0.5)
        var failures = 0
        // kvod's subscribers in both event encodings unless `--events` names some: each has its own scanner.
        let encodings: [EventEncoding] = options.string("events") == nil ? [.full, .compact] : options.eventEncodings()
        let runs: [(ServerKind, EventEncoding)] = options.servers().flatMap { kind in
            kind == .redis ? [(kind, .full)] : encodings.map { (kind, $0) }
        }
        for (kind, events) in runs {
            for fault in [nil] + FanOutRun.Fault.allCases.map(Optional.some) {
                let server = context.start(kind)
                let result = FanOutRun.run(server: server, subscribers: subscribers, payloadLength: 64, seconds: seconds,
                                           pace: options.pipelined(), fault: fault, events: events)
                server.stop()
                var expected = Integrity()
                switch fault {
                case .skip?: expected.lost = UInt64(subscribers)
                case .duplicate?: expected.duplicates = UInt64(subscribers)
                case .reorder?: expected.reordered = UInt64(subscribers)
                case nil: break
                }
                let enough = result.sets > FanOutRun.faultSequence + 2
                let passed = enough && result.integrity == expected
                if !passed { failures += 1 }
                print(pad("selftest \(result.server), fault \(fault?.rawValue ?? "none")", 40)
                      + "lost/reordered/dup \(result.integrity.summary), expected \(expected.summary)"
                      + (enough ? "" : " (too few sets: \(result.sets))") + (passed ? "  ok" : "  FAILED"))
            }
        }
        print(failures == 0 ? "selftest: the checkers catch every fault" : "selftest: \(failures) FAILED")
        exit(failures == 0 ? 0 : 1)
    }

    static func usage(_ message: String? = nil) -> Never {
        if let message { printError("kvod-bench: \(message)\n") }
        printError(synopsis)
        exit(2)
    }

    /// What `--help` prints (the same as this file's header comment).
    static let synopsis = """
        usage: kvod-bench throughput [--server kvod|redis|both] [--subscribers 100] [--bytes 64] [--shape string]
                                     [--sync in-memory|off|normal|full] [--fault skip|duplicate|reorder] [--perf FILE]
                                     [--events full|compact|full,compact]
               kvod-bench latency    [--server both] [--rate 10000] [--subscribers 100] [--bytes 64] [--warmup 1]
                                     [--sync in-memory|off|normal|full] [--events full|compact]
               kvod-bench scale      [--server both] [--connections 10000,100] [--observations 1,1000]   (pairs)
               kvod-bench spread     [--server both] [--objects 100000] [--subscribers 10] [--bytes 64]
               kvod-bench durable    [--subscribers 10] [--bytes 64]     (kvod in-memory, --sync normal, full)
               kvod-bench matrix     [--subscribers 1,10,100] [--bytes 64,1024] [--rate 10000]
                                     [--shapes string-id,object3-id,object10-id,object3-id-nested] [--shape-bytes 64]
                                     [--latency-subscribers 100] [--latency-bytes 64] [--events full|compact]
               kvod-bench all        [matrix options] [--connections ..] [--observations ..] [--objects ..]
                                     [--spread-subscribers 10] [--durable-subscribers 10] [--quick]
               kvod-bench selftest   [--server both] [--events full,compact]
               kvod-bench permissions [--subscribers 1] [--bytes 64] [--globs 100]
        shapes: string, string-id, object3-id, object10-id, object3-id-nested, string-id-nested; as clients write
                them (issue 44): object3-unsorted-id, object10-unsorted-id, object3-float-id, object3-utf8-id,
                object3-escaped-id, object3-client-id
        every command: [--seconds 5] [--runs 1] [--window 1024] [--lag 4096] [--markdown FILE]
                       [--kvod PATH] [--redis PATH] [--perf-command PATH]
        (docs/performance.md; scripts/bench.sh builds everything and runs `all`)

        """

    // MARK: Context

    /// What every command shares: executables, the report being built, and whether every run was clean.
    final class Context {
        let executables: Executables
        let report: Report
        private let markdownPath: String?
        private var failures: [String] = []
        /// Seconds per timed run (`--seconds`, default 5).
        let seconds: Double
        /// Runs per measurement (`--runs`, default 1); the best is reported.
        let runs: Int

        init(options: Options, command: String) {
            var executables = Executables.defaults()
            if let kvod = options.string("kvod") { executables.kvod = kvod }
            if let redis = options.string("redis") { executables.redis = redis }
            if let perf = options.string("perf-command") { executables.perf = perf }
            self.executables = executables
            markdownPath = options.string("markdown")
            seconds = options.double("seconds", 5)
            runs = options.int("runs", 1)
            let limit = ProcessStats.raiseDescriptorLimit()
            ChildProcesses.installInterruptHandler()
            report = Report(command: command, seconds: seconds, descriptorLimit: limit)
            let load = Report.loadAverage()
            print("kvod-bench \(command): kvod \(executables.kvod), \(executables.redis); load average \(load); descriptors \(limit)")
            if let first = Double(load.split(separator: " ").first ?? ""), first > 0.5 {
                print("note: the machine is not idle (load \(first)); figures will be noisy")
            }
        }

        func start(_ kind: ServerKind, maxConnections: Int? = nil) -> ServerProcess {
            ServerProcess.start(kind, executables: executables, maxConnections: maxConnections)
        }

        /// Runs `body` against a freshly started `kind` server `runs` times (default `--runs`), each on its
        /// own server process; prints and checks every run, and returns the best by `better`. Noise from
        /// other work on a shared machine only ever makes a run slower, so best-of-N is the figure that
        /// compares (every run's integrity still counts).
        func measure<Result: Measured>(_ kind: ServerKind, maxConnections: Int? = nil, runs: Int? = nil,
                                       best better: (Result, Result) -> Bool,
                                       _ body: (ServerProcess) -> Result) -> Result {
            var best: Result?
            for _ in 0..<(runs ?? self.runs) {
                let server = start(kind, maxConnections: maxConnections)
                let result = body(server)
                server.stop()
                record(result.integrity)
                print(result.summaryLine)
                if best == nil || better(result, best!) { best = result }
            }
            return best!
        }

        func record(_ integrity: Integrity) {
            if !integrity.isClean { failures.append(integrity.summary) }
        }

        /// Prints the markdown report (and writes it to `--markdown`), then exits: 0, or 1 if a run was not clean.
        func finish() -> Never {
            let text = report.markdown()
            print("")
            print(text)
            if let markdownPath {
                guard let file = fopen(markdownPath, "w") else { fail("cannot write \(markdownPath)") }
                fputs(text, file)
                fclose(file)
                print("(written to \(markdownPath))")
            }
            if !failures.isEmpty {
                printError("kvod-bench: \(failures.count) runs lost, reordered or duplicated deliveries or saw errors "
                      + "(lost/reordered/dup: \(failures.joined(separator: "; ")))\n")
                exit(1)
            }
            exit(0)
        }
    }

    // MARK: Options

    /// `--name value` pairs (and the `--quick` flag), read by name; names outside the command's set are a
    /// usage error, reported before anything runs.
    struct Options {
        private var values: [String: String] = [:]

        init(_ arguments: [String], allowed: Set<String>) {
            var remaining = arguments[...]
            while let flag = remaining.popFirst() {
                if flag == "--help" || flag == "-h" {
                    print(NetworkBenchmark.synopsis, terminator: "")
                    exit(0)
                }
                guard flag.hasPrefix("--") else { NetworkBenchmark.usage("unexpected argument '\(flag)'") }
                let name = String(flag.dropFirst(2))
                guard allowed.contains(name) else {
                    NetworkBenchmark.usage("unknown option \(flag) (this command takes: "
                                           + allowed.sorted().map { "--" + $0 }.joined(separator: " ") + ")")
                }
                if name == "quick" {
                    values[name] = "true"
                } else {
                    guard let value = remaining.popFirst() else { NetworkBenchmark.usage("\(flag) needs a value") }
                    values[name] = value
                }
            }
        }

        func string(_ name: String) -> String? { values[name] }

        func flag(_ name: String) -> Bool { string(name) != nil }

        func int(_ name: String, _ fallback: Int) -> Int {
            guard let text = string(name) else { return fallback }
            guard let value = Int(text.replacingUnderscores), value > 0 else { NetworkBenchmark.usage("--\(name) needs a positive integer") }
            return value
        }

        func double(_ name: String, _ fallback: Double) -> Double {
            guard let text = string(name) else { return fallback }
            guard let value = Double(text), value > 0 else { NetworkBenchmark.usage("--\(name) needs a positive number") }
            return value
        }

        func intList(_ name: String, _ fallback: [Int]) -> [Int] {
            guard let text = string(name) else { return fallback }
            let values = text.split(separator: ",").compactMap { Int(String($0).replacingUnderscores) }
            guard !values.isEmpty, values.allSatisfy({ $0 > 0 }) else { NetworkBenchmark.usage("--\(name) needs positive integers separated by commas") }
            return values
        }

        /// `--window` (default 1,024 sets awaiting their reply) and `--lag` (default 4,096: how far the
        /// slowest subscriber may trail the publisher). 1,024 is the smallest power of two that keeps both
        /// servers at one full core with one subscriber on the 2-core CI machine (256 left Redis at 0.65
        /// of a core, waiting on round trips); the lag keeps every subscriber's queue a few MiB at most.
        func pipelining() -> (window: Int, lag: Int) {
            (int("window", 1024), int("lag", 4096))
        }

        /// Pipelined pacing with `pipelining()`'s bounds.
        func pipelined() -> FanOutRun.Pace {
            let (window, lag) = pipelining()
            return .pipelined(window: window, lag: lag)
        }

        /// `--shapes` (matrix: a comma-separated list; default `SetShape.matrixDefault`) or `--shape` (throughput: one; default `string`), by `SetShape.named`.
        func shapes(fallback: [SetShape] = SetShape.matrixDefault) -> [SetShape] {
            guard let text = string("shapes") ?? string("shape") else { return fallback }
            return text.split(separator: ",").map { name in
                guard let shape = SetShape.parse(String(name)) else {
                    NetworkBenchmark.usage("unknown shape '\(name)' (" + SetShape.named.map(\.name).joined(separator: ", ") + ")")
                }
                return shape
            }
        }

        /// `--events`: the event encodings kvod's subscribers ask for in `hello`, comma-separated (`full`,
        /// `compact`; default `full`, kvod's own default, so that figures stay comparable with earlier runs).
        func eventEncodings() -> [EventEncoding] {
            guard let text = string("events") else { return [.full] }
            let encodings = text.split(separator: ",").map { name in
                guard let encoding = EventEncoding(rawValue: String(name)) else {
                    NetworkBenchmark.usage("unknown --events '\(name)' (full or compact)")
                }
                return encoding
            }
            guard !encodings.isEmpty else { NetworkBenchmark.usage("--events needs full or compact") }
            return encodings
        }

        /// `--events` where one encoding applies to every kvod run (matrix, latency).
        func eventEncoding() -> EventEncoding {
            let encodings = eventEncodings()
            guard encodings.count == 1 else { NetworkBenchmark.usage("--events takes one encoding here (full or compact)") }
            return encodings[0]
        }

        /// `--server kvod|redis|both` (default both), kvod first.
        func servers() -> [ServerKind] {
            switch string("server") ?? "both" {
            case "kvod": return [.kvod(.inMemory)]
            case "redis": return [.redis]
            case "both": return [.kvod(.inMemory), .redis]
            case let other: NetworkBenchmark.usage("unknown server '\(other)' (kvod, redis or both)")
            }
        }

        /// `--sync in-memory|off|normal|full`: how the kvod under test stores its state.
        func storage() -> KVODStorage {
            switch string("sync") ?? "in-memory" {
            case "in-memory", "memory": return .inMemory
            case let mode where ["off", "normal", "full"].contains(mode): return .durable(sync: mode)
            case let other: NetworkBenchmark.usage("unknown --sync '\(other)' (in-memory, off, normal or full)")
            }
        }

    }
}

private extension String {
    /// "10_000" -> "10000".
    var replacingUnderscores: String { String(filter { $0 != "_" }) }
}
