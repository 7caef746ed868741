import KVOWireProbe
import KVOEngine
import KVOJSON
import KVOModel
import KVOServer
#if canImport(Glibc)
import Glibc
#endif

/// `kvod-bench patterns`: what pattern observations that do not match cost a write. One kvod, one run:
/// a publisher pipelines `set`s of one integer to object `bench` (windows of 1,000 requests, every reply
/// read) with no pattern observation registered, then with `--patterns` (10,000) registered by another
/// connection that none of them match, alternately for `--rounds` rounds; it prints sets/s for each and
/// the ratio. Half the patterns share no first byte with `bench` (`user:<i>:*`, `<i>` a number), half
/// share its whole id as their prefix and go on (`bench:<i>*`, key path `v`): the write walks the trie
/// along `bench` and meets none of them. docs/performance.md; the target (issue: pattern observations)
/// is a ratio near 1.0, whatever the number of patterns.
///
///     kvod-bench patterns [--patterns 10000] [--seconds 2] [--rounds 2]
enum PatternBenchmark {
    static func main(arguments: [String]) -> Never {
        let options = IntegerFlags.parse(arguments, usage: "kvod-bench patterns [--patterns N] [--seconds N] [--rounds N]")
        let patterns = options["patterns"] ?? 10_000
        let seconds = Double(options["seconds"] ?? 2)
        let rounds = max(1, options["rounds"] ?? 2)
        engineCost(patterns: patterns, sharingPrefix: false)
        engineCost(patterns: patterns, sharingPrefix: true)
        print("")
        ChildProcesses.installInterruptHandler()
        let server = start()
        let publisher = connect(server.port)
        do {
            try publisher.call("create", ["object": "bench", "values": ["v": 0]])
        } catch {
            fail("create: \(error)")
        }
        print("#### Patterns: sets/s with and without non-matching pattern observations (kvod-bench patterns)")
        print("")
        print("| round | pattern observations | sets/s | ratio |")
        print("| ---: | ---: | ---: | ---: |")
        var ratios: [Double] = []
        for round in 1...rounds {
            let without = setsPerSecond(publisher, seconds: seconds)
            print("| \(round) | 0 | \(Int(without)) | 1.00 |")
            let observer = registerPatterns(patterns, port: server.port)
            let with = setsPerSecond(publisher, seconds: seconds)
            ratios.append(with / without)
            print("| \(round) | \(patterns) | \(Int(with)) | \(format2(with / without)) |")
            observer.close()  // its pattern observations go with the connection
            // Wait until kvod has dropped them: `info` of an object the id-set half matches lists none.
            waitForNoObservers(publisher)
        }
        print("")
        print("ratio (with / without), mean of \(rounds): \(format2(ratios.reduce(0, +) / Double(ratios.count)))")
        kill(server.pid, SIGTERM)
        _ = ChildProcesses.wait(server.pid, seconds: 10)
        exit(0)
    }

    /// The engine alone (no sockets): nanoseconds per `set` of one observed key path, without pattern
    /// observations and with `patterns` that do not match, best of 10 alternating batches of 100,000.
    private static func engineCost(patterns: Int, sharingPrefix: Bool) {
        let keyPath = try! KeyPath("v")
        let engines = [0, patterns].map { count -> KVOEngine in
            let engine = KVOEngine(historyLimit: 1_000)
            var ignored: [ChangeNotification] = []
            _ = try! engine.create("bench", values: ["v": 0], notifications: &ignored)
            _ = try! engine.observe("bench", keyPath: keyPath, options: [.new], connection: ConnectionID(1),
                                    notifications: &ignored)
            for index in 0..<count {
                let shares = sharingPrefix && index % 2 == 1
                _ = try! engine.observe(pattern: ObjectIDPattern(shares ? "bench:\(index)*" : "user:\(index):*"),
                                        keyPath: index % 2 == 0 ? nil : keyPath, options: [.new],
                                        connection: ConnectionID(2), notifications: &ignored)
            }
            return engine
        }
        var best = [Double.infinity, Double.infinity]
        var notifications: [ChangeNotification] = []
        var counter: Int64 = 0
        for _ in 0..<10 {
            for index in 0..<2 {
                let start = monotonicNanoseconds()
                for _ in 0..<100_000 {
                    counter += 1
                    notifications.removeAll(keepingCapacity: true)
                    _ = try! engines[index].set("bench", keyPath: keyPath, value: .int(counter), notifications: &notifications)
                }
                best[index] = min(best[index], Double(monotonicNanoseconds() - start) / 100_000)
            }
        }
        print("engine: \(format2(best[0])) ns per set without pattern observations, \(format2(best[1])) ns with \(patterns) "
            + "that do not match, \(sharingPrefix ? "half of them starting with 'bench:'" : "none sharing a first byte with 'bench'") "
            + "(ratio \(format2(best[0] / best[1])) in sets/s)")
    }

    /// Pipelined sets of `bench`'s `v` (no `id`) per second (`PipelinedSets`).
    private static func setsPerSecond(_ connection: KVOConnection, seconds: Double) -> Double {
        PipelinedSets.perSecond(connection, seconds: seconds) { index in
            #"{"op":"set","object":"bench","keyPath":"v","value":\#(index % 1_000)}"#
        }
    }

    /// A connection holding `count` pattern observations that do not match `bench`.
    private static func registerPatterns(_ count: Int, port: Int) -> KVOConnection {
        let connection = connect(port)
        var requests: [UInt8] = []
        for index in 0..<count {
            let line = index % 2 == 0
                ? #"{"op":"observe","pattern":"user:\#(index):*"}"#
                : #"{"op":"observe","pattern":"bench:\#(index)*","keyPath":"v"}"#
            requests += Array(line.utf8)
            requests.append(0x0A)
        }
        do {
            try connection.send(raw: requests)
            for _ in 0..<count {
                let reply = try connection.readMessage(timeout: 30)
                guard reply["ok"] == true else { fail("observe pattern: \(reply)") }
            }
        } catch {
            fail("registering patterns: \(error)")
        }
        return connection
    }

    private static func waitForNoObservers(_ connection: KVOConnection) {
        do {
            try connection.call("create", ["object": "user:0:probe", "values": [:]])
            while try connection.call("info", ["object": "user:0:probe"])["observers"]?.arrayValue?.isEmpty == false {
                usleep(10_000)
            }
            try connection.call("delete", ["object": "user:0:probe"])
        } catch {
            fail("info: \(error)")
        }
    }

    static func connect(_ port: Int) -> KVOConnection {
        do {
            return try KVOConnection(host: "127.0.0.1", port: port)
        } catch {
            fail("connect to 127.0.0.1:\(port): \(error)")
        }
    }

    /// kvod in memory on a free port, from its stdout line.
    static func start() -> (pid: pid_t, port: Int) {
        let (pid, ports) = ListeningKVOD.start(["--port", "0", "--in-memory"])
        return (pid, ports[0])
    }

    static func format2(_ value: Double) -> String {
        let hundredths = Int((value * 100).rounded())
        return "\(hundredths / 100).\(hundredths % 100 < 10 ? "0" : "")\(hundredths % 100)"
    }
}
