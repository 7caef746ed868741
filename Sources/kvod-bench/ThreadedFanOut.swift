import KVOWireProbe
import KVOJSON
#if canImport(Glibc)
import Glibc
#endif

/// The fan-out harness of `kvod-bench tls` and `kvod-bench websocket`: S subscribers observe one key path,
/// each on its own connection read by its own thread (`LineCounter`: event lines, or WebSocket frames); one
/// plaintext publisher pipelines sets of B-byte values at most `lag` sets ahead of the slowest subscriber.
/// The same harness for every transport, so a ratio between two runs is the server's cost of the transport
/// (plus the client's, on the same cores).
enum ThreadedFanOut {
    /// Deliveries per second over `seconds` of sets pipelined on a plaintext connection to `publisherPort`,
    /// and the cores the server (`serverPID`) used meanwhile. `subscribe` opens one subscriber that observes
    /// `object`'s `v` (options new) and says what its events arrive as.
    static func run(publisherPort: Int, serverPID: pid_t, object: String, subscribers: Int, bytes: Int, seconds: Double,
                    subscribe: (String) -> (KVOConnection, LineCounter.Unit)) -> (perSecond: Double, serverCores: Double) {
        let publisher: KVOConnection
        do {
            publisher = try KVOConnection(host: "127.0.0.1", port: publisherPort)
        } catch {
            fail("connect to 127.0.0.1:\(publisherPort): \(error)")
        }
        _ = try? publisher.call("create", ["object": .string(object), "values": ["v": 0]])
        let counters = (0..<subscribers).map { _ in LineCounter() }
        var readers: [KVOConnection] = []
        var threads: [pthread_t] = []
        for counter in counters {
            let (connection, unit) = subscribe(object)
            readers.append(connection)
            threads.append(LineCounter.startReading(connection, counting: unit, into: counter))
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
                startCPU = ProcessStats.cpuSeconds(pid: serverPID)
            }
        }
        let measuredFrom = start + 500_000_000
        let delivered = counters.reduce(0) { $0 + $1.count } - startDeliveries
        let elapsed = Double(monotonicNanoseconds() - measuredFrom) / 1e9
        let serverCores = (ProcessStats.cpuSeconds(pid: serverPID) - startCPU) / elapsed
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
}
