import KVOClient
import KVOJSON
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `kvod-bench client`: the Swift client library (KVOClient) against a raw socket doing the same work, in
/// the same run, on one in-memory kvod:
/// - replay: `min(--events, 50000)` sets (half kvod's default `--history`) are written first, then read back as history (`observe` with
///   `sinceRev`), by a raw socket counting lines and by one task iterating a `KVOClient` observation (best of
///   three each): the client's receiving capacity, which live events cannot show (they arrive at kvod's set rate);
/// - events: a raw publisher pipelines `--events` sets of `--bytes`-byte strings, at most `--lag` sets ahead
///   of the consumer; first the consumer is a raw socket reader counting event lines, then one task
///   iterating one `KVOClient` observation (values as `JSONValue`). Events per second each, and the ratio;
/// - sets: `--sets` sets with `--tasks` in flight: first one raw connection pipelining them (a window of
///   `--tasks`), then one `KVOClient` used by `--tasks` tasks each awaiting its sets one after another;
/// - round trips: up to 20,000 sets one at a time, a raw connection blocking on each reply against one task
///   awaiting each `set` (the latency the client's write batching must not add to);
/// - memory: the benchmark's own RSS growth over `--idle` idle observations made by one client, per observation.
///
///     kvod-bench client [--events 300000] [--bytes 64] [--lag 10000] [--sets 200000] [--tasks 100] [--idle 10000]
enum ClientBenchmark {
    static func main(arguments: [String]) -> Never {
        let options = IntegerFlags.parse(arguments, usage: "kvod-bench client [--events N] [--bytes N] [--lag N] [--sets N] [--tasks N] [--idle N]")
        let events = options["events"] ?? 300_000
        let bytes = options["bytes"] ?? 64
        let lag = options["lag"] ?? 10_000
        let sets = options["sets"] ?? 200_000
        let tasks = options["tasks"] ?? 100
        let idle = options["idle"] ?? 10_000
        ChildProcesses.installInterruptHandler()
        let server = ServerProcess.start(.kvod(.inMemory), executables: .defaults())
        let port = Int(server.port)
        let finished = Atomic<Bool>(false)
        let report = Mutex<[String]>([])
        Task {
            let lines = await run(port: port, events: events, bytes: bytes, lag: lag, sets: sets, tasks: tasks, idle: idle)
            report.withLock { $0 = lines }
            finished.store(true, ordering: .releasing)
        }
        while !finished.load(ordering: .acquiring) { usleep(10_000) }
        server.stop()
        for line in report.withLock({ $0 }) { print(line) }
        exit(0)
    }

    static func run(port: Int, events: Int, bytes: Int, lag: Int, sets: Int, tasks: Int, idle: Int) async -> [String] {
        do {
            let kvod = try await KVOClient.connect(to: .init(host: "127.0.0.1", port: port, clientName: "kvod-bench"))
            try await kvod.create("e", values: ["v": ""] as JSONValue)
            try await kvod.create("s", values: ["v": ""] as JSONValue)
            var lines = ["#### Swift client library (kvod-bench client)", "",
                         "| workload | raw socket | KVOClient | ratio |", "| --- | ---: | ---: | ---: |"]

            // Events: the raw reader, then the client.
            let rawEvents = rawReaderRate(port: port, events: events, bytes: bytes, lag: lag)
            let clientEvents = try await clientReaderRate(kvod, port: port, events: events, bytes: bytes, lag: lag)
            lines.append("| events/s, one consumer, \(bytes)-byte values | \(Int(rawEvents)) | \(Int(clientEvents)) | \(format2(clientEvents / rawEvents)) |")

            // Replay: history read back as fast as kvod writes it (not bounded by kvod's set rate).
            let replayed = min(events, 50_000)
            let base = try await kvod.create("r", values: ["v": ""] as JSONValue)
            publishWindowed(port: port, object: "r", sets: replayed, bytes: bytes, window: 1000)
            var rawReplay = 0.0
            var clientReplay = 0.0
            for _ in 0..<3 {
                rawReplay = max(rawReplay, rawReplayRate(port: port, sinceRev: base, count: replayed))
                clientReplay = max(clientReplay, try await clientReplayRate(kvod, sinceRev: base, count: replayed))
            }
            lines.append("| events/s, one consumer, \(replayed) replayed (sinceRev), \(bytes)-byte values, best of 3 | \(Int(rawReplay)) | \(Int(clientReplay)) | \(format2(clientReplay / rawReplay)) |")

            // Sets: the raw pipelined generator, then the client from many tasks.
            let rawSets = rawSetRate(port: port, sets: sets, bytes: bytes, window: tasks)
            let clientSets = try await clientSetRate(kvod, sets: sets, bytes: bytes, tasks: tasks)
            lines.append("| sets/s, \(tasks) in flight, \(bytes)-byte values | \(Int(rawSets)) | \(Int(clientSets)) | \(format2(clientSets / rawSets)) |")

            // One set at a time: round trips, where batching the client's writes must not add latency.
            let roundTrips = max(1, min(sets, 20_000))
            let rawTrips = rawRoundTripRate(port: port, sets: roundTrips, bytes: bytes)
            let clientTrips = try await clientSetRate(kvod, sets: roundTrips, bytes: bytes, tasks: 1)
            lines.append("| sets/s, one at a time (µs per round trip), \(bytes)-byte values | \(Int(rawTrips)) (\(format2(1e6 / rawTrips))) | \(Int(clientTrips)) (\(format2(1e6 / clientTrips))) | \(format2(clientTrips / rawTrips)) |")

            // Memory per idle observation.
            let before = ProcessStats.residentBytes(pid: getpid())
            var held: [KVOObservation<JSONValue>] = []
            held.reserveCapacity(idle)
            for _ in 0..<idle { held.append(try await kvod.subscribe("v", of: "s")) }
            let after = ProcessStats.residentBytes(pid: getpid())
            lines.append("")
            lines.append("| idle observations | client RSS growth | per observation |")
            lines.append("| ---: | ---: | ---: |")
            lines.append("| \(idle) | \((after - before) >> 10) KiB | \(Int(Double(after - before) / Double(idle))) bytes |")
            held.removeAll()
            kvod.close()
            return lines
        } catch {
            return ["kvod-bench client: \(error)"]
        }
    }

    // MARK: - Events

    /// A 64-byte (or `bytes`-byte) JSON string value whose first digits are `sequence`, so each set changes it.
    static func value(_ sequence: Int, bytes: Int) -> String {
        var digits = String(sequence)
        if digits.count < bytes { digits += String(repeating: "x", count: bytes - digits.count) }
        return digits
    }

    /// Pipelines `count` sets of object `object` from a thread of its own, at most `lag` ahead of `consumed`;
    /// a second thread reads and discards the replies. Returns when every reply arrived.
    static func publish(port: Int, object: String, count: Int, bytes: Int, lag: Int, consumed: @escaping @Sendable () -> Int) {
        let fd = BlockingSocket.connect(port: port)
        defer { close(fd) }
        let replies = Atomic<Int>(0)
        let reader = Thread.start {
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            var seen = 0
            while seen < count {
                let got = BlockingSocket.read(fd, &buffer)
                if got <= 0 { break }
                seen += BlockingSocket.newlines(buffer, got)
                replies.store(seen, ordering: .relaxed)
            }
        }
        var sent = 0
        var output: [UInt8] = []
        while sent < count {
            let allowed = min(count, consumed() + lag, replies.load(ordering: .relaxed) + 4000)
            if sent >= allowed {
                usleep(20)
                continue
            }
            output.removeAll(keepingCapacity: true)
            let end = min(allowed, sent + 256)
            while sent < end {
                output += Array(#"{"op":"set","object":"\#(object)","keyPath":"v","value":"\#(value(sent, bytes: bytes))"}"#.utf8)
                output.append(0x0A)
                sent += 1
            }
            BlockingSocket.writeAll(fd, output)
        }
        Thread.join(reader)
    }

    /// Events per second read by a raw socket: its own connection observing `e.v`, counting lines.
    static func rawReaderRate(port: Int, events: Int, bytes: Int, lag: Int) -> Double {
        let fd = BlockingSocket.connect(port: port)
        defer { close(fd) }
        BlockingSocket.writeAll(fd, Array(#"{"op":"observe","object":"e","keyPath":"v","options":["new"]}"#.utf8) + [0x0A])
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        // The observe reply first.
        var lines = 0
        while lines < 1 {
            let got = BlockingSocket.read(fd, &buffer)
            if got <= 0 { fail("raw reader: connection closed") }
            lines += BlockingSocket.newlines(buffer, got)
        }
        let received = Atomic<Int>(lines - 1)
        let start = monotonicNanoseconds()
        let publisher = Thread.start {
            publish(port: port, object: "e", count: events, bytes: bytes, lag: lag) { received.load(ordering: .relaxed) }
        }
        var count = lines - 1
        while count < events {
            let got = BlockingSocket.read(fd, &buffer)
            if got <= 0 { fail("raw reader: connection closed") }
            count += BlockingSocket.newlines(buffer, got)
            received.store(count, ordering: .relaxed)
        }
        let elapsed = Double(monotonicNanoseconds() - start) / 1e9
        Thread.join(publisher)
        return Double(events) / elapsed
    }

    /// Events per second taken by one task iterating one `KVOClient` observation of `e.v`.
    static func clientReaderRate(_ kvod: KVOClient, port: Int, events: Int, bytes: Int, lag: Int) async throws -> Double {
        let observation = try await kvod.subscribe("v", of: "e", options: [.new])
        let received = Atomic<Int>(0)
        let start = monotonicNanoseconds()
        let publisher = Thread.start {
            publish(port: port, object: "e", count: events, bytes: bytes, lag: lag) { received.load(ordering: .relaxed) }
        }
        var count = 0
        for try await change in observation {
            if change.rawNew == nil { fail("client reader: a change without a value") }
            count += 1
            received.store(count, ordering: .relaxed)
            if count == events { break }
        }
        let elapsed = Double(monotonicNanoseconds() - start) / 1e9
        Thread.join(publisher)
        return Double(events) / elapsed
    }

    /// Events per second read by a raw socket observing `r.v` since `sinceRev` (the replay, counted in lines).
    static func rawReplayRate(port: Int, sinceRev: Int64, count: Int) -> Double {
        let fd = BlockingSocket.connect(port: port)
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        let start = monotonicNanoseconds()
        BlockingSocket.writeAll(fd, Array(#"{"op":"observe","object":"r","keyPath":"v","options":["new"],"sinceRev":\#(sinceRev)}"#.utf8) + [0x0A])
        var lines = 0
        while lines < count + 1 {
            let got = BlockingSocket.read(fd, &buffer)
            if got <= 0 { fail("raw replay reader: connection closed") }
            lines += BlockingSocket.newlines(buffer, got)
        }
        return Double(count) / (Double(monotonicNanoseconds() - start) / 1e9)
    }

    /// Events per second taken by one task iterating one `KVOClient` observation of `r.v` since `sinceRev`.
    static func clientReplayRate(_ kvod: KVOClient, sinceRev: Int64, count: Int) async throws -> Double {
        let start = monotonicNanoseconds()
        var received = 0
        for try await change in try await kvod.subscribe("v", of: "r", options: [.new], sinceRev: sinceRev) {
            if change.rawNew == nil || change.reason != .valueChanged { fail("client replay: unexpected change \(change.reason)") }
            received += 1
            if received == count { break }
        }
        return Double(count) / (Double(monotonicNanoseconds() - start) / 1e9)
    }

    // MARK: - Sets

    /// Sets per second from one raw connection keeping `window` sets in flight.
    static func rawSetRate(port: Int, sets: Int, bytes: Int, window: Int) -> Double {
        let begin = monotonicNanoseconds()
        publishWindowed(port: port, object: "s", sets: sets, bytes: bytes, window: window)
        return Double(sets) / (Double(monotonicNanoseconds() - begin) / 1e9)
    }

    /// Pipelines `sets` sets of `object`.v with at most `window` replies outstanding.
    static func publishWindowed(port: Int, object: String, sets: Int, bytes: Int, window: Int) {
        let fd = BlockingSocket.connect(port: port)
        defer { close(fd) }
        let replies = Atomic<Int>(0)
        let reader = Thread.start {
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            var seen = 0
            while seen < sets {
                let got = BlockingSocket.read(fd, &buffer)
                if got <= 0 { break }
                seen += BlockingSocket.newlines(buffer, got)
                replies.store(seen, ordering: .relaxed)
            }
        }
        var sent = 0
        var output: [UInt8] = []
        while sent < sets {
            let allowed = min(sets, replies.load(ordering: .relaxed) + window)
            if sent >= allowed {
                usleep(20)
                continue
            }
            output.removeAll(keepingCapacity: true)
            while sent < allowed {
                output += Array(#"{"op":"set","id":\#(sent + 1),"object":"\#(object)","keyPath":"v","value":"\#(value(sent, bytes: bytes))"}"#.utf8)
                output.append(0x0A)
                sent += 1
            }
            BlockingSocket.writeAll(fd, output)
        }
        Thread.join(reader)
    }

    /// Sets per second from one raw connection sending a set and blocking until its reply, `sets` times.
    static func rawRoundTripRate(port: Int, sets: Int, bytes: Int) -> Double {
        let fd = BlockingSocket.connect(port: port)
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        let begin = monotonicNanoseconds()
        for sent in 0..<sets {
            let line = Array(#"{"op":"set","id":\#(sent + 1),"object":"s","keyPath":"v","value":"\#(value(sent, bytes: bytes))"}"#.utf8) + [0x0A]
            BlockingSocket.writeAll(fd, line)
            var seen = 0
            while seen == 0 {
                let got = BlockingSocket.read(fd, &buffer)
                if got <= 0 { return 0 }
                seen = BlockingSocket.newlines(buffer, got)
            }
        }
        return Double(sets) / (Double(monotonicNanoseconds() - begin) / 1e9)
    }

    /// Sets per second from `tasks` tasks sharing one client, each awaiting its sets one after another.
    static func clientSetRate(_ kvod: KVOClient, sets: Int, bytes: Int, tasks: Int) async throws -> Double {
        let start = monotonicNanoseconds()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<tasks {
                group.addTask {
                    var index = task
                    while index < sets {
                        _ = try await kvod.set("v", of: "s", to: value(index, bytes: bytes))
                        index += tasks
                    }
                }
            }
            try await group.waitForAll()
        }
        return Double(sets) / (Double(monotonicNanoseconds() - start) / 1e9)
    }
}

/// Blocking loopback sockets for the raw side of `kvod-bench client`.
enum BlockingSocket {
    static func connect(port: Int) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if result != 0 { fail("connect to 127.0.0.1:\(port): \(String(cString: strerror(errno)))") }
        // A read that waits 20 s means a lost event or reply: fail rather than hang.
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return fd
    }

    static func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
        var sent = 0
        while sent < bytes.count {
            let result = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
            if result < 0 {
                if errno == EINTR { continue }
                fail("send: \(String(cString: strerror(errno)))")
            }
            sent += result
        }
    }

    static func read(_ fd: Int32, _ buffer: inout [UInt8]) -> Int {
        while true {
            let got = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if got < 0 && errno == EINTR { continue }
            if got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { fail("no data for 20 s on a raw socket") }
            return got
        }
    }

    static func newlines(_ buffer: [UInt8], _ count: Int) -> Int {
        var lines = 0
        for index in 0..<count where buffer[index] == 0x0A { lines += 1 }
        return lines
    }
}

/// A POSIX thread running a closure (the raw side blocks in `recv`/`send`, never on the cooperative pool).
enum Thread {
    final class Box: Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }

    static func start(_ body: @escaping @Sendable () -> Void) -> pthread_t {
        var thread = pthread_t()
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        pthread_create(&thread, nil, { raw in
            let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
            box.body()
            return nil
        }, box)
        return thread
    }

    static func join(_ thread: pthread_t) {
        pthread_join(thread, nil)
    }
}
