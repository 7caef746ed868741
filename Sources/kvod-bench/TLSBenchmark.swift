import KVOWireProbe
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
        let options = IntegerFlags.parse(arguments, usage: "kvod-bench tls [--subscribers N] [--bytes N] [--seconds N] [--idle N]")
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
        let plain = ThreadedFanOut.run(publisherPort: server.plainPort, serverPID: server.pid, object: "fanplain",
                                       subscribers: subscribers, bytes: bytes, seconds: seconds) { object in
            observing(object, connection: connect(server.plainPort, tls: nil))
        }
        let plainPerCPU = plain.perSecond / max(plain.serverCores, 0.01)
        print("| \(subscribers) | \(bytes) | plaintext | \(Int(plain.perSecond)) | 1.00 | \(format2(plain.serverCores)) | \(Int(plainPerCPU)) | 1.00 |")
        let secure = ThreadedFanOut.run(publisherPort: server.plainPort, serverPID: server.pid, object: "fantls",
                                        subscribers: subscribers, bytes: bytes, seconds: seconds) { object in
            observing(object, connection: connect(server.tlsPort, tls: tls))
        }
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

    /// `connection` once it observes `object`'s `v` (options new), for the fan-out.
    private static func observing(_ object: String, connection: KVOConnection) -> (KVOConnection, LineCounter.Unit) {
        do {
            try connection.call("observe", ["object": .string(object), "keyPath": "v", "options": ["new"]])
        } catch {
            fail("observe: \(error)")
        }
        return (connection, .line)
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

/// Events one subscriber received (lines, or WebSocket frames), counted by its reader thread, read by the
/// publisher's.
final class LineCounter: Sendable {
    /// What one event arrives as.
    enum Unit: Sendable {
        /// A JSON line (TCP, TLS): counted by its newline.
        case line
        /// An unmasked WebSocket frame from the server: counted by walking the headers, payloads skipped.
        case webSocketFrame
    }

    private let events = Atomic<Int>(0)

    var count: Int { events.load(ordering: .relaxed) }

    /// Starts a thread that reads `connection` until it closes, counting `unit`s into `counter`.
    static func startReading(_ connection: KVOConnection, counting unit: Unit, into counter: LineCounter) -> pthread_t {
        let context = Unmanaged.passRetained(ReaderContext(connection: connection, counter: counter, unit: unit)).toOpaque()
        var thread = pthread_t()
        let status = pthread_create(&thread, nil, { raw in
            let context = Unmanaged<ReaderContext>.fromOpaque(raw!).takeRetainedValue()
            var buffer = [UInt8](repeating: 0, count: 65536)
            var frames = WebSocketFrameCounter()
            while true {
                let count = buffer.withUnsafeMutableBytes { bytes in (try? context.connection.receiveRaw(into: bytes)) ?? 0 }
                if count <= 0 { break }
                var events = 0
                switch context.unit {
                case .line:
                    for index in 0..<count where buffer[index] == 0x0A { events += 1 }
                case .webSocketFrame:
                    events = frames.count(buffer, upTo: count)
                }
                context.counter.events.add(events, ordering: .relaxed)
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
        let unit: Unit
        init(connection: KVOConnection, counter: LineCounter, unit: Unit) {
            self.connection = connection
            self.counter = counter
            self.unit = unit
        }
    }
}

/// Counts the server-to-client WebSocket frames in a byte stream read in pieces (headers may straddle reads).
struct WebSocketFrameCounter {
    private var header: [UInt8] = []
    private var payloadLeft = 0

    /// Frames whose header completes in `bytes[0..<count]`. Payloads are skipped, not looked at (a reader
    /// that parses frames finds each payload's end from its header).
    mutating func count(_ bytes: [UInt8], upTo count: Int) -> Int {
        var frames = 0
        var index = 0
        while index < count {
            if payloadLeft > 0 {
                let skipped = min(payloadLeft, count - index)
                payloadLeft -= skipped
                index += skipped
                continue
            }
            header.append(bytes[index])
            index += 1
            guard header.count >= 2 else { continue }
            let short = Int(header[1] & 0x7F)
            let needed = short == 126 ? 4 : short == 127 ? 10 : 2
            guard header.count == needed else { continue }
            switch short {
            case 126: payloadLeft = Int(header[2]) << 8 | Int(header[3])
            case 127: payloadLeft = header[2...9].reduce(0) { $0 << 8 | Int($1) }
            default: payloadLeft = short
            }
            header.removeAll(keepingCapacity: true)
            frames += 1
        }
        return frames
    }
}

/// The kvod under test: plaintext and TLS listeners, in memory.
struct TLSServer {
    let pid: pid_t
    let plainPort: Int
    let tlsPort: Int

    static func start(directory: String) -> TLSServer {
        let (pid, ports) = ListeningKVOD.start(["--port", "0", "--in-memory", "--tls-port", "0",
                                                "--tls-cert", directory + "/cert.pem", "--tls-key", directory + "/key.pem",
                                                "--max-connections", "5000"], listeners: 2)
        return TLSServer(pid: pid, plainPort: ports[0], tlsPort: ports[1])
    }

    func stop() {
        kill(pid, SIGTERM)
        _ = ChildProcesses.wait(pid, seconds: 10)
    }
}
