#if canImport(Glibc)
import Glibc
#endif

/// The results of one `kvod-bench` invocation as markdown (for docs/performance.md): a header with the
/// date, the machine and the exact command, then one table per workload. Also the one-line summaries
/// printed as each run finishes.
final class Report {
    private let command: String
    private let seconds: Double
    private let descriptorLimit: Int
    private let startedAt = Report.utcDate()
    private let loadAtStart = Report.loadAverage()
    private var sections: [String] = []

    init(command: String, seconds: Double, descriptorLimit: Int) {
        self.command = command
        self.seconds = seconds
        self.descriptorLimit = descriptorLimit
    }

    // MARK: Sections

    func addMatrix(_ rows: [(kvod: FanOutResult, redis: FanOutResult)], seconds: Double, runs: Int, pace: FanOutRun.Pace) {
        var text = """
        #### Throughput: S subscribers of one key path (kvod) or channel (Redis), one pipelined publisher

        \(paceDescription(pace)).
        \(format1(seconds)) s per cell, a fresh server per run\(bestOf(runs)).
        Deliveries/s counts every event received by every subscriber; "kvod/Redis" is the ratio of
        deliveries/s. CPU is in cores (1.00 = one core busy) over the cell, server / load generator.
        "Event bytes" is what one delivery costs on the wire (kvod's JSON event line; Redis's RESP message).
        \(eventsNote(rows.first?.kvod))

        | S | B | kvod sets/s | kvod deliveries/s | Redis publishes/s | Redis deliveries/s | kvod/Redis | CPU kvod / generator | CPU Redis / generator | event bytes kvod; Redis | lost/reordered/dup kvod; Redis |
        |---:|---:|---:|---:|---:|---:|---:|---|---|---|---|

        """
        for (kvod, redis) in rows {
            text += "| \(kvod.subscribers) | \(kvod.payloadBytes) | \(grouped(kvod.setsPerSecond)) "
                + "| \(grouped(kvod.deliveriesPerSecond))\(mark(kvod.serverCPU)) "
                + "| \(grouped(redis.setsPerSecond)) | \(grouped(redis.deliveriesPerSecond))\(mark(redis.serverCPU)) "
                + "| x\(fixed2(ratio(kvod.deliveriesPerSecond, redis.deliveriesPerSecond))) "
                + "| \(cores(kvod.serverCPU)) / \(cores(kvod.generatorCPU)) | \(cores(redis.serverCPU)) / \(cores(redis.generatorCPU)) "
                + "| \(grouped(kvod.wireBytesPerDelivery)); \(grouped(redis.wireBytesPerDelivery)) "
                + "| \(kvod.integrity.summary); \(redis.integrity.summary) |\n"
        }
        sections.append(text + disturbanceNote(rows.flatMap { [$0.kvod.serverCPU, $0.redis.serverCPU] }))
    }

    /// Issue 13: the sets applications send (request ids, object values, nested key paths), each cell kvod
    /// and Redis in the same run, with each server's CPU per set and per delivery.
    func addShapeMatrix(_ rows: [(kvod: FanOutResult, redis: FanOutResult)], seconds: Double, runs: Int, pace: FanOutRun.Pace) {
        var text = """
        #### Throughput by set shape: S subscribers, one pipelined publisher, kvod against Redis PUBLISH of the same bytes

        \(paceDescription(pace)).
        \(format1(seconds)) s per cell, a fresh server per run\(bestOf(runs)).
        Shapes: `string` (no `id`, key path `v`), `string-id`, `object3-id` and `object10-id` (a JSON object of 3 or
        10 members, one of them an object), `-nested`: key path `a.b.c` (Redis: channel `bench.a.b.c`). B is the
        value's bytes: the JSON object's text, or the string's content (what Redis publishes in both cases).
        "kvod/Redis" is the ratio of sets/s; CPU µs is the server's utime + stime (/proc/<pid>/stat) over the
        cell divided by its sets and by its deliveries.
        \(eventsNote(rows.first?.kvod))

        | S | shape | B | kvod sets/s | Redis publishes/s | kvod/Redis | kvod CPU µs per set; per delivery | Redis CPU µs per publish; per delivery | CPU kvod / Redis | event bytes kvod; Redis | lost/reordered/dup kvod; Redis |
        |---:|---|---:|---:|---:|---:|---|---|---|---|---|

        """
        for (kvod, redis) in rows {
            text += "| \(kvod.subscribers) | \(kvod.shape) | \(kvod.payloadBytes) "
                + "| \(grouped(kvod.setsPerSecond))\(mark(kvod.serverCPU)) | \(grouped(redis.setsPerSecond))\(mark(redis.serverCPU)) "
                + "| x\(fixed2(ratio(kvod.setsPerSecond, redis.setsPerSecond))) "
                + "| \(fixed2(kvod.serverMicrosecondsPerSet)); \(fixed2(kvod.serverMicrosecondsPerDelivery)) "
                + "| \(fixed2(redis.serverMicrosecondsPerSet)); \(fixed2(redis.serverMicrosecondsPerDelivery)) "
                + "| \(cores(kvod.serverCPU)) / \(cores(redis.serverCPU)) "
                + "| \(grouped(kvod.wireBytesPerDelivery)); \(grouped(redis.wireBytesPerDelivery)) "
                + "| \(kvod.integrity.summary); \(redis.integrity.summary) |\n"
        }
        sections.append(text + disturbanceNote(rows.flatMap { [$0.kvod.serverCPU, $0.redis.serverCPU] }))
    }

    /// Which event encoding kvod's subscribers used in a table's runs (`--events`).
    private func eventsNote(_ kvod: FanOutResult?) -> String {
        "kvod's subscribers asked for \(kvod?.events?.rawValue ?? "full") events (docs/protocol.md, \"Compact events\")."
    }

    func addThroughput(_ results: [FanOutResult], title: String) {
        var text = """
        #### \(title)

        "events" is the encoding kvod's subscribers asked for (docs/protocol.md, "Compact events"; Redis has
        one); "event bytes" is what one delivery costs on the wire (kvod's JSON event line; Redis's RESP message);
        "CPU ns per delivery" is the server's utime + stime over the run divided by its deliveries (steadier than
        deliveries/s when other work takes the server's core).

        | server | events | sets/s | deliveries/s | vs first row | CPU server / generator | CPU ns per delivery | event bytes | lost/reordered/dup |
        |---|---|---:|---:|---:|---|---:|---:|---|

        """
        for result in results {
            text += "| \(result.server) | \(result.events?.rawValue ?? "-") "
                + "| \(grouped(result.setsPerSecond)) | \(grouped(result.deliveriesPerSecond))\(mark(result.serverCPU)) "
                + "| x\(fixed2(ratio(result.deliveriesPerSecond, results[0].deliveriesPerSecond))) "
                + "| \(cores(result.serverCPU)) / \(cores(result.generatorCPU)) | \(grouped(result.serverMicrosecondsPerDelivery * 1000)) "
                + "| \(grouped(result.wireBytesPerDelivery)) "
                + "| \(result.integrity.summary) |\n"
        }
        sections.append(text + disturbanceNote(results.map(\.serverCPU)))
    }

    /// Issue 11: sets/s and server CPU per set in open mode and as a user with `globs` glob rules.
    func addPermissionCost(open: FanOutResult, restricted: FanOutResult, globs: Int, runs: Int) {
        func microsecondsPerSet(_ result: FanOutResult) -> Double {
            result.setsPerSecond > 0 ? result.serverCPU / result.setsPerSecond * 1e6 : 0
        }
        let plural = open.subscribers == 1 ? "" : "s"
        var text = """
        #### Permission checks: \(open.subscribers) subscriber\(plural), \(open.payloadBytes)-byte values, a user with \(globs) glob rules

        Per-set cost as an authenticated user against open mode, same run, runs alternating\(bestOf(runs, by: "sets/s")).
        Cost ratio: open sets/s over the user's (above 1: the user's sets cost more).

        | kvod | sets/s | server CPU per set | CPU server / generator | lost/reordered/dup |
        |---|---:|---:|---|---|

        """
        for result in [open, restricted] {
            text += "| \(result.server) | \(grouped(result.setsPerSecond))\(mark(result.serverCPU)) "
                + "| \(fixed2(microsecondsPerSet(result))) µs | \(cores(result.serverCPU)) / \(cores(result.generatorCPU)) "
                + "| \(result.integrity.summary) |\n"
        }
        text += "\nCost ratio (sets/s): x\(fixed2(ratio(open.setsPerSecond, restricted.setsPerSecond))); "
            + "server CPU per set: x\(fixed2(ratio(microsecondsPerSet(restricted), microsecondsPerSet(open))))\n"
        sections.append(text + disturbanceNote([open.serverCPU, restricted.serverCPU]))
    }

    func addLatency(_ results: [FanOutResult], rate: Int, seconds: Double, warmup: Double, runs: Int) {
        guard let first = results.first else { return }
        var text = """
        #### Latency: \(grouped(Double(rate))) sets/s to \(first.subscribers) subscribers, \(first.payloadBytes)-byte values

        End to end, per delivery: from the publisher writing the set (the send time is in the value) to the
        subscriber reading the event, \(format1(seconds)) s after a \(format1(warmup)) s warm-up\(bestOf(runs, by: "p50")).
        Log-linear histogram (within 0.8 %).

        | server | p50 | p90 | p99 | p99.9 | max | deliveries measured | sets/s sent | CPU server / generator | lost/reordered/dup |
        |---|---:|---:|---:|---:|---:|---:|---:|---|---|

        """
        for result in results {
            let latency = result.latency
            text += "| \(result.server) | \(milliseconds(latency.percentile(50))) | \(milliseconds(latency.percentile(90))) "
                + "| \(milliseconds(latency.percentile(99))) | \(milliseconds(latency.percentile(99.9))) "
                + "| \(milliseconds(latency.maximum)) | \(grouped(Double(latency.count))) | \(grouped(result.setsPerSecond)) "
                + "| \(cores(result.serverCPU)) / \(cores(result.generatorCPU)) | \(result.integrity.summary) |\n"
        }
        if results.count == 2 {
            let (a, b) = (results[0].latency, results[1].latency)
            let ratios = [50, 90, 99, 99.9].map { "x" + fixed2(ratio(Double(a.percentile($0)), Double(b.percentile($0)))) }
            text += "| \(results[0].server)/\(results[1].server) | " + ratios.joined(separator: " | ")
                + " | x\(fixed2(ratio(Double(a.maximum), Double(b.maximum)))) | | | | |\n"
        }
        sections.append(text)
    }

    func addScale(_ results: [ScaleResult]) {
        var text = """
        #### Scale: C idle connections with K observations each (server RSS)

        Each observation is a distinct key path of one object (kvod) or a distinct channel (Redis). Per
        connection: RSS growth from opening C - 1 connections (one ping each); per observation: growth from
        adding the C x K observations. "held": connections answering a ping at the end.

        | server | C x K | RSS before | after connecting | after observing | per connection | per observation | held |
        |---|---|---:|---:|---:|---:|---:|---:|

        """
        for result in results {
            text += "| \(result.server) | \(grouped(Double(result.connections))) x \(grouped(Double(result.observationsPerConnection))) "
                + "| \(mebibytes(result.baseBytes)) | \(mebibytes(result.connectedBytes)) | \(mebibytes(result.observingBytes)) "
                + "| \(kibibytes(result.bytesPerConnection)) | \(bytes(result.bytesPerObservation)) "
                + "| \(grouped(Double(result.held)))\(result.integrity.isClean ? "" : " (errors \(result.integrity.errors))") |\n"
        }
        sections.append(text)
    }

    func addSpread(_ results: [SpreadResult], bytes: Int, runs: Int) {
        guard let first = results.first else { return }
        var text = """
        #### Spread: \(grouped(Double(first.objects))) objects (channels), each observed once, sets on random ones

        \(first.subscribers) subscriber connections (object i observed by subscriber i mod \(first.subscribers)),
        \(bytes)-byte values, one pipelined publisher; every set is delivered exactly once\(bestOf(runs)).

        | server | sets/s | deliveries/s | vs first row | CPU server / generator | lost/reordered/dup |
        |---|---:|---:|---:|---|---|

        """
        for result in results {
            text += "| \(result.server) | \(grouped(result.setsPerSecond)) | \(grouped(result.deliveriesPerSecond))\(mark(result.serverCPU)) "
                + "| x\(fixed2(ratio(result.deliveriesPerSecond, first.deliveriesPerSecond))) "
                + "| \(cores(result.serverCPU)) / \(cores(result.generatorCPU)) | \(result.integrity.summary) |\n"
        }
        sections.append(text + disturbanceNote(results.map(\.serverCPU)))
    }

    func addDurable(_ results: [FanOutResult], subscribers: Int, bytes: Int, runs: Int) {
        guard let first = results.first else { return }
        var text = """
        #### Durability: kvod throughput by storage mode, \(subscribers) subscribers, \(bytes)-byte values

        `--data <temporary directory> --sync normal|full` against `--in-memory`; the same pipelined
        publisher\(bestOf(runs)). Each loop iteration's writes are one SQLite transaction (group commit).

        | kvod | sets/s | deliveries/s | vs in-memory | CPU server / generator | lost/reordered/dup |
        |---|---:|---:|---:|---|---|

        """
        for result in results {
            text += "| \(result.server) | \(grouped(result.setsPerSecond)) | \(grouped(result.deliveriesPerSecond)) "
                + "| x\(fixed2(ratio(result.setsPerSecond, first.setsPerSecond))) "
                + "| \(cores(result.serverCPU)) / \(cores(result.generatorCPU)) | \(result.integrity.summary) |\n"
        }
        sections.append(text)
    }

    /// The whole report: header, then every section in the order the workloads ran.
    func markdown() -> String {
        let invocation = getenv("KVOD_BENCH_COMMAND").map { String(cString: $0) }
            ?? CommandLine.arguments.joined(separator: " ")
        var lines = [
            "### kvod-bench \(command), \(startedAt)",
            "",
            "- machine: \(Report.machine())",
            "- command: `\(invocation)`",
        ]
        if let revision = getenv("KVOD_BENCH_REVISION") { lines.append("- kvod revision: \(String(cString: revision))") }
        lines += [
            "- load average (1, 5, 15 min) at start: \(loadAtStart); at end: \(Report.loadAverage())",
            "- load generator: one thread, epoll, non-blocking sockets; descriptor limit \(descriptorLimit)",
            "",
        ]
        return lines.joined(separator: "\n") + "\n" + sections.joined(separator: "\n")
    }

    // MARK: Progress lines

    static func line(_ result: FanOutResult) -> String {
        pad("throughput \(result.server)", 30) + pad("S=\(result.subscribers) B=\(result.payloadBytes)", 14)
            + (result.shape == .plainString ? "" : pad(result.shape.description, 19))
            + pad("sets/s \(grouped(result.setsPerSecond))", 20) + pad("deliveries/s \(grouped(result.deliveriesPerSecond))", 28)
            + pad("CPU server \(cores(result.serverCPU)) generator \(cores(result.generatorCPU))", 34)
            + pad("\(grouped(result.wireBytesPerDelivery)) B/event", 14)
            + "lost/reordered/dup \(result.integrity.summary)"
    }

    static func latencyLine(_ result: FanOutResult) -> String {
        let latency = result.latency
        return pad("latency \(result.server)", 30) + pad("S=\(result.subscribers) B=\(result.payloadBytes)", 14)
            + "p50 \(milliseconds(latency.percentile(50))) p90 \(milliseconds(latency.percentile(90))) "
            + "p99 \(milliseconds(latency.percentile(99))) p99.9 \(milliseconds(latency.percentile(99.9))) "
            + "max \(milliseconds(latency.maximum))  sets/s \(grouped(result.setsPerSecond))  "
            + "CPU server \(cores(result.serverCPU)) generator \(cores(result.generatorCPU))  "
            + "lost/reordered/dup \(result.integrity.summary)"
    }

    static func scaleLine(_ result: ScaleResult) -> String {
        pad("scale \(result.server)", 30) + pad("C=\(result.connections) K=\(result.observationsPerConnection)", 20)
            + "RSS \(mebibytes(result.baseBytes)) -> \(mebibytes(result.connectedBytes)) -> \(mebibytes(result.observingBytes))  "
            + "per connection \(kibibytes(result.bytesPerConnection))  per observation \(bytes(result.bytesPerObservation))  "
            + "held \(result.held)/\(result.connections)" + (result.integrity.isClean ? "" : "  errors \(result.integrity.errors)")
    }

    static func spreadLine(_ result: SpreadResult) -> String {
        pad("spread \(result.server)", 30) + pad("N=\(result.objects) S=\(result.subscribers)", 20)
            + pad("sets/s \(grouped(result.setsPerSecond))", 20) + pad("deliveries/s \(grouped(result.deliveriesPerSecond))", 28)
            + pad("CPU server \(cores(result.serverCPU)) generator \(cores(result.generatorCPU))", 34)
            + "lost/reordered/dup \(result.integrity.summary)"
    }

    // MARK: Machine

    /// "<CPU model> x <online CPUs>, Linux <release>, <memory> GiB".
    static func machine() -> String {
        let cpuinfo = ProcessStats.readFile("/proc/cpuinfo") ?? ""
        let model = cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
            .flatMap { $0.split(separator: ":", maxSplits: 1).last }.map { $0.trimmingSpaces } ?? "unknown CPU"
        let release = (ProcessStats.readFile("/proc/sys/kernel/osrelease") ?? "?").trimmingSpaces
        let memory = (ProcessStats.readFile("/proc/meminfo") ?? "").split(separator: "\n").first { $0.hasPrefix("MemTotal:") }
            .flatMap { $0.split(separator: " ").compactMap { Double($0) }.first }.map { format1($0 / 1_048_576) } ?? "?"
        return "\(model) x \(sysconf(Int32(_SC_NPROCESSORS_ONLN))) (nproc), Linux \(release), \(memory) GiB"
    }

    /// The first three fields of /proc/loadavg.
    static func loadAverage() -> String {
        (ProcessStats.readFile("/proc/loadavg") ?? "").split(separator: " ").prefix(3).joined(separator: " ")
    }

    private static func utcDate() -> String {
        var now = time(nil)
        var parts = tm()
        gmtime_r(&now, &parts)
        var buffer = [CChar](repeating: 0, count: 64)
        let length = strftime(&buffer, buffer.count, "%Y-%m-%d %H:%M UTC", &parts)
        return String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// A pipelined in-memory run keeps its server busy: below this many cores, something else on the
    /// machine took the server's CPU and the figure understates it.
    static let busyServerCores = 0.9

    /// " †" after a figure whose server used less than `busyServerCores`.
    private func mark(_ serverCPU: Double) -> String {
        serverCPU < Report.busyServerCores ? " †" : ""
    }

    /// The footnote for `mark`, when any figure has one.
    private func disturbanceNote(_ serverCPUs: [Double]) -> String {
        guard serverCPUs.contains(where: { $0 < Report.busyServerCores }) else { return "" }
        return "\n† The server used less than \(fixed2(Report.busyServerCores)) of a core, so it was not the bottleneck for the "
            + "whole run: most likely other work on the machine took its CPU (or the run was too short). The figure is low.\n"
    }

    /// ", best of N runs (by deliveries/s)" when there were several.
    private func bestOf(_ runs: Int, by criterion: String = "deliveries/s") -> String {
        runs > 1 ? ", best of \(runs) runs by \(criterion)" : ""
    }

    private func paceDescription(_ pace: FanOutRun.Pace) -> String {
        switch pace {
        case .pipelined(let window, let lag):
            return "Pipelined: at most \(window) sets awaiting a reply, the slowest subscriber at most \(lag) behind"
        case .fixedRate(let rate):
            return "\(rate) sets/s"
        case .counted(let sets, let window):
            return "\(sets) sets, at most \(window) awaiting a reply"
        }
    }
}

// MARK: Formatting

/// 1234567.8 -> "1,234,568".
func grouped(_ value: Double) -> String {
    guard value.isFinite else { return "-" }
    let digits = String(Int(value.rounded()))
    var result = ""
    for (index, character) in digits.reversed().enumerated() {
        if index > 0 && index % 3 == 0 && character != "-" { result.append(",") }
        result.append(character)
    }
    return String(result.reversed())
}

func ratio(_ numerator: Double, _ denominator: Double) -> Double {
    denominator > 0 ? numerator / denominator : 0
}

/// Two decimals, always both ("1.40").
func fixed2(_ value: Double) -> String {
    guard value.isFinite else { return "-" }
    let hundredths = Int((value * 100).rounded())
    let fraction = abs(hundredths) % 100
    return (hundredths < 0 ? "-" : "") + "\(abs(hundredths) / 100)." + (fraction < 10 ? "0" : "") + "\(fraction)"
}

/// A fraction of one core, two decimals.
func cores(_ value: Double) -> String { fixed2(value) }

/// Nanoseconds as milliseconds with three decimals ("0.452 ms").
func milliseconds(_ nanoseconds: UInt64) -> String {
    let thousandths = (Double(nanoseconds) / 1_000).rounded()
    let whole = Int(thousandths) / 1000
    let fraction = Int(thousandths) % 1000
    let padded = String(repeating: "0", count: 3 - String(fraction).count) + String(fraction)
    return "\(whole).\(padded) ms"
}

func mebibytes(_ bytes: Int) -> String { format1(Double(bytes) / 1_048_576) + " MiB" }

func kibibytes(_ bytes: Double) -> String { fixed2(bytes / 1024) + " KiB" }

func bytes(_ value: Double) -> String { grouped(value) + " B" }

private extension Substring {
    var trimmingSpaces: String { String(drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\n" }.reversed()) }
}

private extension String {
    var trimmingSpaces: String { Substring(self).trimmingSpaces }
}
