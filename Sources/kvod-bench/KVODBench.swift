#if canImport(Glibc)
import Glibc
#endif

/// `kvod-bench`: benchmarks that print figures (never pass/fail). See docs/performance.md.
///
///     kvod-bench engine [--observations N] [--sets N] [--globs N]
///     kvod-bench engine-permissions [--sets 1000000] [--globs 100]   (per-set cost of permission checks)
///     kvod-bench throughput|latency|scale|spread|durable|matrix|all|selftest|permissions [options]   (NetworkBenchmark)
///     kvod-bench callgrind [--shapes ...] [--subscribers 1] [--sets 20480]   (instructions per set; CallgrindBenchmark)
///     kvod-bench storage [--objects N] [--commits N]
///     kvod-bench tls [--subscribers N] [--bytes N] [--seconds N] [--idle N]   (TLSBenchmark)
///     kvod-bench client [--events N] [--bytes N] [--lag N] [--sets N] [--tasks N] [--idle N]   (ClientBenchmark)
///     kvod-bench websocket [--subscribers N] [--bytes N] [--seconds N] [--runs N]   (WebSocketBenchmark)
///     kvod-bench patterns [--patterns N] [--seconds N] [--rounds N]   (PatternBenchmark)
///     kvod-bench live-queries [--queries N] [--seconds N] [--rounds N]   (LiveQueryBenchmark)
///     kvod-bench cluster [--clients N] [--seconds N] [--writes N] [--sync-always 1|0]   (ClusterBenchmark)
///     kvod-bench integrity [--entries N]                             (IntegrityBenchmark)
@main
struct KVODBench {
    static func main() {
        var arguments = Array(CommandLine.arguments.dropFirst())
        guard let command = arguments.first else { usage() }
        arguments.removeFirst()
        if command == "client" {
            // The Swift client library against a raw socket doing the same work (ClientBenchmark.swift).
            ClientBenchmark.main(arguments: arguments)
        }
        if command == "tls" {
            // TLS fan-out against plaintext, and memory per idle TLS connection (TLSBenchmark.swift).
            TLSBenchmark.main(arguments: arguments)
        }
        if command == "websocket" {
            // WebSocket fan-out against TCP, one kvod (WebSocketBenchmark.swift).
            WebSocketBenchmark.main(arguments: arguments)
        }
        if command == "patterns" {
            // Sets/s with and without non-matching pattern observations, one kvod (PatternBenchmark.swift).
            PatternBenchmark.main(arguments: arguments)
        }
        if command == "live-queries" {
            // Sets/s and ns per set with 10,000 live queries of which one matches (LiveQueryBenchmark.swift).
            LiveQueryBenchmark.main(arguments: arguments)
        }
        if command == "cluster" {
            // Sets/s and write latency: single mode, one node with JetStream, three nodes (ClusterBenchmark.swift).
            ClusterBenchmark.main(arguments: arguments)
        }
        if command == "callgrind" {
            // Instructions per set for each set shape, kvod under valgrind (CallgrindBenchmark.swift).
            CallgrindBenchmark.main(arguments: arguments)
        }
        if NetworkBenchmark.commands.contains(command) {
            // kvod against Redis over TCP; these take string options too (NetworkBenchmark.swift).
            NetworkBenchmark.main(command: command, arguments: arguments)
        }
        var options: [String: Int] = [:]
        while let flag = arguments.first {
            arguments.removeFirst()
            guard flag.hasPrefix("--"), let text = arguments.first, let value = Int(text) else { usage() }
            arguments.removeFirst()
            options[String(flag.dropFirst(2))] = value
        }
        switch command {
        case "engine":
            EngineBenchmark.run(observations: options["observations"] ?? 100_000, sets: options["sets"] ?? 200_000)
            EngineBenchmark.runAggregates(sets: (options["sets"] ?? 200_000) / 10)
            EngineBenchmark.runPermissions(sets: options["sets"] ?? 200_000, globs: options["globs"] ?? 100)
        case "engine-permissions":
            EngineBenchmark.runPermissions(sets: options["sets"] ?? 1_000_000, globs: options["globs"] ?? 100)
        case "integrity":
            IntegrityBenchmark.run(entries: options["entries"] ?? 200_000)
        case "storage":
            StorageBenchmark.run(objects: options["objects"] ?? 1_000_000, commits: options["commits"] ?? 1000)
        case "storage-restart":
            // The second half of `storage`, started by it in a fresh process.
            StorageBenchmark.restart(objects: options["objects"] ?? 1_000_000)
        default:
            usage()
        }
    }

    static func usage() -> Never {
        print("usage: kvod-bench engine [--observations N] [--sets N] [--globs N]")
        print("       kvod-bench engine-permissions [--sets 1000000] [--globs 100]")
        print("       kvod-bench throughput|latency|scale|spread|durable|matrix|all|selftest [options]   (<command> --help)")
        print("       kvod-bench callgrind [--shapes string,object3-id,...] [--subscribers 1] [--sets 20480] [--warmup 2048] [--users-globs N]")
        print("       kvod-bench storage [--objects N] [--commits N]")
        print("       kvod-bench integrity [--entries N]")
        print("       kvod-bench tls [--subscribers N] [--bytes N] [--seconds N] [--idle N]")
        print("       kvod-bench websocket [--subscribers N] [--bytes N] [--seconds N] [--runs N]")
        print("       kvod-bench patterns [--patterns N] [--seconds N] [--rounds N]")
        print("       kvod-bench live-queries [--queries N] [--seconds N] [--rounds N]")
        print("       kvod-bench cluster [--clients N] [--seconds N] [--writes N] [--sync-always 1|0]")
        print("       kvod-bench client [--events N] [--bytes N] [--lag N] [--sets N] [--tasks N] [--idle N]")
        exit(2)
    }
}
