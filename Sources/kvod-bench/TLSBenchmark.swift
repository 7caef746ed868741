import KVOClientKit
import KVOJSON
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `kvod-bench tls`: what TLS costs, against one kvod listening on both a plaintext and a TLS port, with a
/// throwaway certificate made by the `openssl` command:
/// - fan-out: S subscribers observe one key path, each on its own connection read by its own thread (which
///   counts event lines, decrypting first over TLS); one plaintext publisher pipelines sets of B-byte values
///   at most `lag` sets ahead of the slowest subscriber. Deliveries per second with plaintext subscribers,
///   then with TLS ones (the same harness both times, so the ratio is kvod's cost of encrypting, plus the
///   client's of decrypting on the same cores);
/// - memory: kvod's RSS growth over N idle connections (each did one ping), per connection, plaintext and TLS,
///   each measured on a fresh kvod.
///
///     kvod-bench tls [--subscribers 100] [--bytes 64] [--seconds 5] [--idle 1000]
enum TLSBenchmark {
    static func main(arguments: [String]) -> Never {
        var options: [String: Int] = [:]
        var rest = arguments[...]
        while let flag = rest.first, let value = rest.dropFirst().first.flatMap({ Int($0) }), flag.hasPrefix("--") {
            options[String(flag.dropFirst(2))] = value
            rest = rest.dropFirst(2)
        }
        guard rest.isEmpty else { fail("usage: kvod-bench tls [--subscribers N] [--bytes N] [--seconds N] [--idle N]") }
        let subscribers = options["subscribers"] ?? 100
        let bytes = options["bytes"] ?? 64
        let seconds = Double(options["seconds"] ?? 5)
        let idle = options["idle"] ?? 1000
        ChildProcesses.installInterruptHandler()
        let directory = makeCertificate()
        let server = TLSServer.start(directory: directory)
        let tls = TLSClientOptions(certificateAuthorityPath: directory + "/cert.pem")

        print("#### TLS: fan-out and idle memory (kvod-bench tls)")
        print("")
        print("| subscribers | bytes | transport | deliveries/s | ratio | kvod CPU (cores) | deliveries per kvod CPU-second | ratio |")
        print("| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
        let plain = fanOut(server, tls: nil, subscribers: subscribers, bytes: bytes, seconds: seconds)
        let plainPerCPU = plain.perSecond / max(plain.serverCores, 0.01)
        print("| \(subscribers) | \(bytes) | plaintext | \(Int(plain.perSecond)) | 1.00 | \(format2(plain.serverCores)) | \(Int(plainPerCPU)) | 1.00 |")
        let secure = fanOut(server, tls: tls, subscribers: subscribers, bytes: bytes, seconds: seconds)
        let securePerCPU = secure.perSecond / max(secure.serverCores, 0.01)
        print("| \(subscribers) | \(bytes) | TLS 1.3 | \(Int(secure.perSecond)) | \(format2(secure.perSecond / plain.perSecond)) | "
            + "\(format2(secure.serverCores)) | \(Int(securePerCPU)) | \(format2(securePerCPU / plainPerCPU)) |")
        print("")
        print("| idle connections | transport | kvod RSS growth | per connection |")
        print("| ---: | --- | ---: | ---: |")
        server.stop()
        for options in [nil, tls] {
            // A fresh kvod each: memory freed by the fan-out runs would otherwise hide the growth.
            let fresh = TLSServer.start(directory: directory)
            let growth = idleGrowth(fresh, tls: options, count: idle)
            fresh.stop()
            print("| \(idle) | \(options == nil ? "plaintext" : "TLS 1.3") | \(growth >> 10) KiB | \(format1(Double(growth) / Double(idle) / 1024)) KiB |")
        }
        // The throwaway certificate and key go with the run.
        for file in ["cert.pem", "key.pem"] { unlink(directory + "/" + file) }
        rmdir(directory)
        exit(0)
    }

    // MARK: - Fan-out

    /// Deliveries per second over `seconds` of pipelined sets, and the cores kvod used meanwhile.
    private static func fanOut(_ server: TLSServer, tls: TLSClientOptions?, subscribers: Int, bytes: Int,
                               seconds: Double) -> (perSecond: Double, serverCores: Double) {
        let object = "fan\(tls == nil ? "plain" : "tls")"
        let publisher = connect(server.plainPort, tls: nil)
        _ = try? publisher.call("create", ["object": .string(object), "values": ["v": 0]])
        let counters = (0..<subscribers).map { _ in LineCounter() }
        var readers: [KVOConnection] = []
        for _ in 0..<subscribers {
            let connection = connect(tls == nil ? server.plainPort : server.tlsPort, tls: tls)
            do {
                try connection.call("observe", ["object": .string(object), "keyPath": "v", "options": ["new"]])
            } catch {
                fail("observe: \(error)")
            }
            readers.append(connection)
        }
        var threads: [pthread_t] = []
        for (connection, counter) in zip(readers, counters) {
            threads.append(LineCounter.startReading(connection, into: counter))
        }
        // Each value differs (a change is notified only when the value changes): the sequence number, padded.
        let head = Array(#"{"op":"set","object":"\#(object)","keyPath":"v","value":""#.utf8)
        func setLine(_ sequence: Int) -> [UInt8] {
            let number = Array(String(sequence).utf8)
            return head + number + [UInt8](repeating: UInt8(ascii: "x"), count: max(0, bytes - number.count)) + Array("\"}\n".utf8)
        }
        let window = 64
        let lag = 2_000
        var sent = 0
        var acknowledged = 0
        let start = monotonicNanoseconds()
        let end = start + UInt64(seconds * 1e9)
        var startDeliveries = 0
        var startCPU = 0.0
        while monotonicNanoseconds() < end {
            let slowest = counters.map { $0.count }.min() ?? 0
            if sent - acknowledged < window, sent - slowest < lag {
                do { try publisher.send(raw: setLine(sent)) } catch { fail("publish: \(error)") }
                sent += 1
                continue
            }
            guard acknowledged < sent else {
                // Held back by the slowest subscriber, with no reply outstanding: let the readers catch up.
                usleep(100)
                continue
            }
            do { _ = try publisher.readLine(timeout: 10) } catch { fail("publish reply: \(error)") }
            acknowledged += 1
            if startDeliveries == 0, monotonicNanoseconds() > start + 500_000_000 {
                startDeliveries = counters.reduce(0) { $0 + $1.count }
                startCPU = ProcessStats.cpuSeconds(pid: server.pid)
            }
        }
        let measuredFrom = start + 500_000_000
        let delivered = counters.reduce(0) { $0 + $1.count } - startDeliveries
        let elapsed = Double(monotonicNanoseconds() - measuredFrom) / 1e9
        let serverCores = (ProcessStats.cpuSeconds(pid: server.pid) - startCPU) / elapsed
        // Wake the reader threads first and close once they are done: closing frees the TLS session a
        // reader may still be inside.
        for connection in readers { connection.shutdownSocket() }
        for thread in threads { pthread_join(thread, nil) }
        for connection in readers { connection.close() }
        while acknowledged < sent {
            guard (try? publisher.readLine(timeout: 10)) != nil else { break }
            acknowledged += 1
        }
        return (Double(delivered) / elapsed, serverCores)
    }

    // MARK: - Idle memory

    /// kvod's RSS growth from opening `count` connections that each answered one ping.
    private static func idleGrowth(_ server: TLSServer, tls: TLSClientOptions?, count: Int) -> Int {
        // Warm up (the loop's pools, OpenSSL's first allocations), then measure.
        var warm: [KVOConnection] = []
        for _ in 0..<20 { warm.append(pinged(server, tls: tls)) }
        usleep(300_000)
        let before = ProcessStats.residentBytes(pid: server.pid)
        var connections: [KVOConnection] = []
        for _ in 0..<count { connections.append(pinged(server, tls: tls)) }
        usleep(500_000)
        let after = ProcessStats.residentBytes(pid: server.pid)
        for connection in connections + warm { connection.close() }
        usleep(500_000)
        return after - before
    }

    private static func pinged(_ server: TLSServer, tls: TLSClientOptions?) -> KVOConnection {
        let connection = connect(tls == nil ? server.plainPort : server.tlsPort, tls: tls)
        do { try connection.call("ping") } catch { fail("ping: \(error)") }
        return connection
    }

    private static func connect(_ port: Int, tls: TLSClientOptions?) -> KVOConnection {
        do {
            return try KVOConnection(host: "127.0.0.1", port: port, tls: tls)
        } catch {
            fail("connect to 127.0.0.1:\(port): \(error)")
        }
    }

    // MARK: - Set-up

    /// A temporary directory with a self-signed certificate for 127.0.0.1 (cert.pem, key.pem).
    private static func makeCertificate() -> String {
        var template = Array("/tmp/kvod-bench-tls-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else { fail("mkdtemp failed") }
        let directory = String(cString: made)
        let pid = ChildProcesses.spawn([
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", directory + "/key.pem", "-out", directory + "/cert.pem", "-days", "1", "-subj", "/CN=kvod-bench",
            "-addext", "subjectAltName=IP:127.0.0.1",
        ], standardOutput: nil)
        guard ChildProcesses.wait(pid, seconds: 20) else { fail("openssl req did not finish") }
        return directory
    }

    private static func format2(_ value: Double) -> String {
        let hundredths = Int((value * 100).rounded())
        return "\(hundredths / 100).\(hundredths % 100 < 10 ? "0" : "")\(hundredths % 100)"
    }

    private static func format1(_ value: Double) -> String {
        let tenths = Int((value * 10).rounded())
        return "\(tenths / 10).\(tenths % 10)"
    }
}

/// Events one subscriber received (lines), counted by its reader thread, read by the publisher's.
final class LineCounter: Sendable {
    private let lines = Atomic<Int>(0)

    var count: Int { lines.load(ordering: .relaxed) }

    /// Starts a thread that reads `connection` until it closes, counting newlines into `counter`.
    static func startReading(_ connection: KVOConnection, into counter: LineCounter) -> pthread_t {
        let context = Unmanaged.passRetained(ReaderContext(connection: connection, counter: counter)).toOpaque()
        var thread = pthread_t()
        let status = pthread_create(&thread, nil, { raw in
            let context = Unmanaged<ReaderContext>.fromOpaque(raw!).takeRetainedValue()
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = buffer.withUnsafeMutableBytes { bytes in (try? context.connection.receiveRaw(into: bytes)) ?? 0 }
                if count <= 0 { break }
                var lines = 0
                for index in 0..<count where buffer[index] == 0x0A { lines += 1 }
                context.counter.lines.add(lines, ordering: .relaxed)
            }
            return nil
        }, context)
        guard status == 0 else { fail("pthread_create: \(status)") }
        return thread
    }

    /// What a reader thread needs (its connection is used by that thread only once started).
    private final class ReaderContext: @unchecked Sendable {
        let connection: KVOConnection
        let counter: LineCounter
        init(connection: KVOConnection, counter: LineCounter) {
            self.connection = connection
            self.counter = counter
        }
    }
}

/// The kvod under test: plaintext and TLS listeners, in memory.
struct TLSServer {
    let pid: pid_t
    let plainPort: Int
    let tlsPort: Int

    static func start(directory: String) -> TLSServer {
        let executable = Executables.defaults().kvod
        let arguments = [executable, "--host", "127.0.0.1", "--port", "0", "--in-memory", "--log-level", "warning",
                         "--tls-port", "0", "--tls-cert", directory + "/cert.pem", "--tls-key", directory + "/key.pem",
                         "--max-connections", "5000"]
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { fail("pipe failed") }
        let pid = ChildProcesses.spawn(arguments, standardOutput: ends[1])
        Glibc.close(ends[1])
        defer { Glibc.close(ends[0]) }
        var text: [UInt8] = []
        while text.filter({ $0 == 0x0A }).count < 2 {
            var chunk = [UInt8](repeating: 0, count: 256)
            let count = chunk.withUnsafeMutableBytes { read(ends[0], $0.baseAddress, $0.count) }
            guard count > 0 else { fail("kvod exited before listening (swift build -c release --product kvod)") }
            text += chunk[0..<count]
        }
        let lines = String(decoding: text, as: UTF8.self).split(separator: "\n")
        guard lines.count >= 2, let plain = lines[0].split(separator: ":").last.flatMap({ Int($0) }),
              let secure = lines[1].split(separator: ":").last.flatMap({ Int($0) })
        else { fail("unexpected lines from kvod: \(lines)") }
        return TLSServer(pid: pid, plainPort: plain, tlsPort: secure)
    }

    func stop() {
        kill(pid, SIGTERM)
        _ = ChildProcesses.wait(pid, seconds: 10)
    }
}
