import KVOWireProbe
import KVOJSON
#if canImport(Glibc)
import Glibc
#endif

/// `kvod-bench cluster`: what replication through NATS JetStream costs a write (docs/performance.md,
/// "Cluster"). Three set-ups, one after another, each started fresh on loopback: one kvod in single mode
/// (`--in-memory`), one kvod node with a one-server JetStream stream (R1), and three kvod nodes with three
/// NATS servers (R3; the clients spread over the nodes). For each: write-to-reply latency (p50, p99) of
/// `--writes` sets from one client, one at a time, then sets/s from `--clients` connections each writing one
/// set at a time to its own object for `--seconds`, then the same with each connection keeping
/// `--pipeline` sets in flight (a node's pipelined writes join its next batch). With three nodes, also
/// deliveries/s to `--observers` observers of one key path, all on one node and then spread over the three,
/// and the kvod CPU time per delivery (`ClusterFanOut`). kvod nodes run `--in-memory`; nats-server
/// (scripts/setup.sh installs it) keeps its stream in a temporary directory, with `sync_interval: always` (each
/// append fsynced before it is acknowledged, as docs/design.md, "NATS server settings", asks) unless
/// `--sync-always 0` (JetStream's default: a sync every 2 minutes). Main thread, plus one thread per client
/// connection.
///
///     kvod-bench cluster [--clients 100] [--seconds 5] [--writes 2000] [--pipeline 16] [--observers 300] [--sync-always 1]
enum ClusterBenchmark {
    /// The set-ups measured.
    enum Setup: CaseIterable {
        case single, oneNode, threeNodes

        var label: String {
            switch self {
            case .single: return "single mode"
            case .oneNode: return "1 node, JetStream R1"
            case .threeNodes: return "3 nodes, JetStream R3"
            }
        }
    }

    static func main(arguments: [String]) -> Never {
        let options = IntegerFlags.parse(arguments, usage: "kvod-bench cluster [--clients N] [--seconds N] [--writes N] [--pipeline N] [--observers N] [--sync-always 1|0]")
        let clients = max(1, options["clients"] ?? 100)
        let seconds = Double(max(1, options["seconds"] ?? 5))
        let writes = max(100, options["writes"] ?? 2_000)
        let pipeline = max(1, options["pipeline"] ?? 16)
        let observers = max(1, options["observers"] ?? 300)
        let syncAlways = (options["sync-always"] ?? 1) != 0
        // nats-server 2.15 or later: KVOD_NATS_SERVER (scripts/setup-python.sh sets it), the repository's .venv
        // (run from its root), or one on the system paths.
        let candidates: [String] = [getenv("KVOD_NATS_SERVER").map { String(cString: $0) }, ".venv/bin/nats-server",
                                    "/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server"].compactMap { $0 }
        guard let nats = candidates.first(where: { access($0, X_OK) == 0 })
        else { fail("nats-server is not installed (scripts/setup-python.sh installs 2.15 into .venv)") }
        ChildProcesses.installInterruptHandler()
        let sync = syncAlways ? "sync_interval: always" : "sync_interval: default (2 min)"
        print("#### Cluster: sets/s and write-to-reply latency (kvod-bench cluster, NATS \(sync))")
        print("")
        print("| set-up | latency p50 (ms) | p99 (ms) | sets/s, \(clients) clients | sets/s, \(clients) clients pipelining \(pipeline) |")
        print("| --- | ---: | ---: | ---: | ---: |")
        var fanOut: [(label: String, result: ClusterFanOut.Result)] = []
        for setup in Setup.allCases {
            let deployment = Deployment(setup, nats: nats, syncAlways: syncAlways)
            let latencies = latency(port: deployment.kvodPorts[0], writes: writes)
            let rate = throughput(ports: deployment.kvodPorts, clients: clients, seconds: seconds, pipeline: 1)
            let pipelined = throughput(ports: deployment.kvodPorts, clients: clients, seconds: seconds, pipeline: pipeline)
            print("| \(setup.label) | \(milliseconds(latencies[latencies.count / 2])) | \(milliseconds(latencies[latencies.count * 99 / 100])) | \(Int(rate)) | \(Int(pipelined)) |")
            if setup == .threeNodes {
                createFanOutObject(on: deployment.kvodPorts)
                let ports = deployment.kvodPorts
                for (label, observerPorts) in [("\(observers) observers on 1 node", Array(repeating: ports[0], count: observers)),
                                               ("\(observers) observers over 3 nodes", (0..<observers).map { ports[$0 % 3] })] {
                    let result = ClusterFanOut.run(publisherPort: ports[0], observerPorts: observerPorts,
                                                   kvodPIDs: deployment.kvodPIDs, natsPIDs: deployment.natsPIDs, seconds: seconds)
                    fanOut.append((label, result))
                }
            }
            deployment.stop()
        }
        print("")
        print("#### Cluster: deliveries/s to observers of one key path, 3 nodes (JetStream R3, \(sync)), one publisher on n1")
        print("")
        print("| observers | deliveries/s | sets/s | seconds | kvod CPU (s, 3 nodes) | kvod CPU µs per delivery | NATS CPU (s) | kvod-bench CPU (s) |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for (label, result) in fanOut {
            print("| \(label) | \(Int(result.deliveriesPerSecond)) | \(Int(result.setsPerSecond)) | \(decimal(result.seconds)) | \(decimal(result.kvodCPUSeconds)) | \(decimal(result.kvodMicrosecondsPerDelivery)) | \(decimal(result.natsCPUSeconds)) | \(decimal(result.generatorCPUSeconds)) |")
        }
        exit(0)
    }

    /// Creates the fan-out object on the first node and waits until every node has it.
    private static func createFanOutObject(on ports: [Int]) {
        let connection = connect(ports[0])
        _ = try? connection.call("create", ["object": "fan", "values": ["v": ""]], timeout: 30)
        connection.close()
        for port in ports {
            let reader = connect(port)
            let deadline = monotonicNanoseconds() + 30_000_000_000
            while (try? reader.request("get", ["object": "fan"]))?["ok"] != true {
                guard monotonicNanoseconds() < deadline else { fail("object fan never reached port \(port)") }
                usleep(20_000)
            }
            reader.close()
        }
    }

    /// Two decimals.
    private static func decimal(_ value: Double) -> String {
        let hundredths = Int((value * 100).rounded())
        return "\(hundredths / 100).\(hundredths % 100 < 10 ? "0" : "")\(hundredths % 100)"
    }

    /// `writes` sets from one connection, one at a time: each one's nanoseconds from request to reply, sorted.
    private static func latency(port: Int, writes: Int) -> [UInt64] {
        let connection = connect(port)
        _ = try? connection.call("create", ["object": "latency", "values": ["v": 0]])
        var samples: [UInt64] = []
        samples.reserveCapacity(writes)
        for index in 0..<(writes + 100) {
            let line = Array(#"{"op":"set","object":"latency","keyPath":"v","value":\#(index)}"#.utf8) + [0x0A]
            let start = monotonicNanoseconds()
            do {
                try connection.send(raw: line)
                let reply = try connection.readLine(timeout: 30)
                guard !reply.starts(with: Array(#"{"ok":false"#.utf8)) else { fail("set: \(String(decoding: reply, as: UTF8.self))") }
            } catch {
                fail("set: \(error)")
            }
            if index >= 100 { samples.append(monotonicNanoseconds() - start) }  // the first 100 warm up
        }
        connection.close()
        return samples.sorted()
    }

    /// One writer thread's connection and count.
    private final class Writer: @unchecked Sendable {
        let connection: KVOConnection
        let line: [UInt8]
        let end: UInt64
        /// Sets kept in flight.
        let pipeline: Int
        /// Sets answered; read by the main thread after the join.
        var count = 0
        var failure: String?

        init(connection: KVOConnection, object: String, end: UInt64, pipeline: Int) {
            self.connection = connection
            line = Array(#"{"op":"set","object":"\#(object)","keyPath":"v","value":1}"#.utf8) + [0x0A]
            self.end = end
            self.pipeline = pipeline
        }
    }

    /// Sets/s from `clients` connections spread over `ports`, each keeping `pipeline` sets in flight (sent,
    /// reply not read) for `seconds`.
    private static func throughput(ports: [Int], clients: Int, seconds: Double, pipeline: Int) -> Double {
        let connections = (0..<clients).map { index -> KVOConnection in
            let connection = connect(ports[index % ports.count])
            _ = try? connection.call("create", ["object": .string("w\(index)"), "values": ["v": 0]])
            return connection
        }
        let start = monotonicNanoseconds()
        let end = start + UInt64(seconds * 1e9)
        let writers = connections.enumerated().map { Writer(connection: $1, object: "w\($0)", end: end, pipeline: pipeline) }
        var threads: [pthread_t] = []
        for writer in writers {
            var thread = pthread_t()
            let status = pthread_create(&thread, nil, { raw in
                let writer = Unmanaged<Writer>.fromOpaque(raw!).takeRetainedValue()
                do {
                    try writer.connection.send(raw: Array([[UInt8]](repeating: writer.line, count: writer.pipeline).joined()))
                    var inFlight = writer.pipeline
                    while inFlight > 0 {
                        let reply = try writer.connection.readLine(timeout: 30)
                        guard !reply.starts(with: Array(#"{"ok":false"#.utf8)) else {
                            writer.failure = String(decoding: reply, as: UTF8.self)
                            break
                        }
                        writer.count += 1
                        inFlight -= 1
                        if monotonicNanoseconds() < writer.end {
                            try writer.connection.send(raw: writer.line)
                            inFlight += 1
                        }
                    }
                } catch {
                    writer.failure = "\(error)"
                }
                return nil
            }, Unmanaged.passRetained(writer).toOpaque())
            guard status == 0 else { fail("pthread_create: \(status)") }
            threads.append(thread)
        }
        for thread in threads { pthread_join(thread, nil) }
        let elapsed = Double(monotonicNanoseconds() - start) / 1e9
        if let failure = writers.compactMap(\.failure).first { fail("a writer failed: \(failure)") }
        for connection in connections { connection.close() }
        return Double(writers.reduce(0) { $0 + $1.count }) / elapsed
    }

    /// The processes of one set-up, started and ready (a write goes through).
    private struct Deployment {
        var pids: [pid_t] = []
        var natsPIDs: [pid_t] = []
        var kvodPIDs: [pid_t] = []
        var kvodPorts: [Int] = []
        let directory: String

        init(_ setup: Setup, nats: String, syncAlways: Bool) {
            var template = Array("/tmp/kvod-bench-cluster-XXXXXX".utf8CString)
            guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else { fail("mkdtemp failed") }
            directory = String(cString: made)
            let natsCount = setup == .threeNodes ? 3 : setup == .oneNode ? 1 : 0
            let natsPorts = (0..<natsCount).map { _ in freePort() }
            let routePorts = (0..<natsCount).map { _ in freePort() }
            // No command-line flag sets sync_interval: a configuration file does, the flags adding the rest.
            var configuration: [String] = []
            if syncAlways && natsCount > 0 {
                let path = "\(directory)/nats.conf"
                guard let file = fopen(path, "w") else { fail("cannot write \(path)") }
                fputs("jetstream {\n    sync_interval: always\n}\n", file)
                fclose(file)
                configuration = ["-c", path]
            }
            for index in 0..<natsCount {
                var arguments = [nats] + configuration + ["-a", "127.0.0.1", "-p", String(natsPorts[index]), "-js", "-sd", "\(directory)/nats-\(index + 1)",
                                 "-n", "nats-\(index + 1)", "-l", "\(directory)/nats-\(index + 1).log"]
                if natsCount > 1 {
                    arguments += ["--cluster_name", "kvodbench", "--cluster", "nats://127.0.0.1:\(routePorts[index])",
                                  "--routes", routePorts.map { "nats://127.0.0.1:\($0)" }.joined(separator: ",")]
                }
                natsPIDs.append(ChildProcesses.spawn(arguments, standardOutput: nil))
                pids.append(natsPIDs[index])
            }
            let urls = natsPorts.map { "nats://127.0.0.1:\($0)" }.joined(separator: ",")
            for index in 0..<max(1, natsCount) {
                var arguments = ["--in-memory"]
                if natsCount > 0 { arguments += ["--cluster", urls, "--cluster-stream", "bench", "--node", "n\(index + 1)"] }
                let (pid, port) = startKVOD(arguments)
                pids.append(pid)
                kvodPIDs.append(pid)
                kvodPorts.append(port)
            }
            waitUntilWritable()
        }

        /// Retries a create on every node until the stream takes it (JetStream elects its leaders first).
        private func waitUntilWritable() {
            let deadline = monotonicNanoseconds() + 60_000_000_000
            for (index, port) in kvodPorts.enumerated() {
                let connection = connect(port)
                while true {
                    let reply = try? connection.request("create", ["object": .string("ready\(index)")], timeout: 30)
                    if reply?["ok"] == true { break }
                    guard monotonicNanoseconds() < deadline else { fail("the cluster did not take writes in 60 s: \(String(describing: reply))") }
                    usleep(200_000)
                }
                connection.close()
            }
        }

        func stop() {
            for pid in pids.reversed() {
                kill(pid, SIGTERM)
                if !ChildProcesses.wait(pid, seconds: 10) {
                    kill(pid, SIGKILL)
                    _ = ChildProcesses.wait(pid, seconds: 10)
                }
            }
            // NATS's store is a tree of directories: rm -rf it.
            let remover = ChildProcesses.spawn(["rm", "-rf", directory], standardOutput: nil)
            _ = ChildProcesses.wait(remover, seconds: 30)
        }
    }

    /// kvod with `arguments` on a free loopback port, from its stdout line.
    private static func startKVOD(_ arguments: [String]) -> (pid: pid_t, port: Int) {
        let (pid, ports) = ListeningKVOD.start(["--port", "0"] + arguments)
        return (pid, ports[0])
    }

    /// A free TCP port on 127.0.0.1 (bound to port 0, read back, closed).
    private static func freePort() -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { Glibc.close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { fail("bind failed") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    private static func connect(_ port: Int) -> KVOConnection {
        do {
            return try KVOConnection(host: "127.0.0.1", port: port)
        } catch {
            fail("connect to 127.0.0.1:\(port): \(error)")
        }
    }

    /// Nanoseconds as milliseconds with two decimals.
    private static func milliseconds(_ nanoseconds: UInt64) -> String {
        let hundredths = Int((Double(nanoseconds) / 10_000).rounded())
        return "\(hundredths / 100).\(hundredths % 100 < 10 ? "0" : "")\(hundredths % 100)"
    }
}
