import Foundation
import KVOWireProbe
import KVOEngine
import KVOJSON
import KVOModel
#if canImport(Glibc)
import Glibc
#endif

/// `kvod-bench live-queries`: what live queries (observe with `where`, docs/protocol.md "Live queries")
/// cost a write, with `--queries` (10,000) of which one matches the written object.
///
/// The objects are 1,000 orders `order:<i>` (`{"owner":"u<i>","status":"open","total":…,"lines":[…]}`);
/// each write sets `total` of `order:7`. Two query shapes, each measured in the engine alone (ns per set,
/// best of 10 alternating batches, without queries and with them):
/// - *indexed*: `owner == 'u<q>' && total >= 0` on `order:*` with key path `total`, one per user: the
///   shape "my orders" of an app. The equality term files each query in a bucket; `u7`'s query matches.
/// - *unindexed*: `total > <big + q>` on `order:*`: no equality term, every query meets every write to an
///   order and reads `total`, none matches. The worst case: its cost grows with the number of queries.
///
/// Then over TCP (one kvod in memory): a publisher pipelines `set`s with request ids (windows of 1,000,
/// every reply read) with the indexed queries registered by an observer connection that reads the events of
/// its one matching query as they come, and without them, an ordinary observation of `order:7`'s total
/// hearing the same events instead. Both sides deliver one event per set; the ratio is the queries' cost.
/// The engine rows compare the same way.
///
///     kvod-bench live-queries [--queries 10000] [--seconds 2] [--rounds 2]
enum LiveQueryBenchmark {
    static func main(arguments: [String]) -> Never {
        let options = IntegerFlags.parse(arguments, usage: "kvod-bench live-queries [--queries N] [--seconds N] [--rounds N]")
        let queries = options["queries"] ?? 10_000
        let seconds = Double(options["seconds"] ?? 2)
        let rounds = max(1, options["rounds"] ?? 2)
        print("#### Live queries: the cost of \(queries) queries of which one matches (kvod-bench live-queries)")
        print("")
        print("| where | shape | ns per set without | with \(queries) | ratio (sets/s) | filters evaluated per set |")
        print("| --- | --- | ---: | ---: | ---: | ---: |")
        engineCost(queries: queries, indexed: true)
        engineCost(queries: queries, indexed: false)
        ChildProcesses.installInterruptHandler()
        let server = PatternBenchmark.start()
        let publisher = PatternBenchmark.connect(server.port)
        do {
            var requests: [UInt8] = []
            for index in 0..<1_000 { requests += Array((createLine(index) + "\n").utf8) }
            try publisher.send(raw: requests)
            for _ in 0..<1_000 {
                let reply = try publisher.readMessage(timeout: 30)
                guard reply["ok"] == true else { fail("create: \(reply)") }
            }
        } catch {
            fail("create: \(error)")
        }
        var ratios: [Double] = []
        for round in 1...rounds {
            // Without queries, an ordinary observation of order:7's total hears the same events.
            let plain = PatternBenchmark.connect(server.port)
            do {
                try plain.call("observe", ["object": "order:7", "keyPath": "total", "options": ["new", "old"]])
            } catch {
                fail("observe: \(error)")
            }
            let plainDrained = DrainedConnection(plain)
            let plainDrain = Foundation.Thread { drainEvents(plainDrained.connection) }
            plainDrain.start()
            let without = setsPerSecond(publisher, seconds: seconds)
            plain.shutdownSocket()
            while !plainDrain.isFinished { usleep(1_000) }
            plain.close()
            let observer = registerQueries(queries, port: server.port)
            let drained = DrainedConnection(observer)
            let drain = Foundation.Thread { drainEvents(drained.connection) }
            drain.start()
            let with = setsPerSecond(publisher, seconds: seconds)
            ratios.append(with / without)
            print("| TCP, round \(round) | indexed | \(Int(without)) sets/s | \(Int(with)) sets/s | "
                + "\(PatternBenchmark.format2(with / without)) | |")
            // The drain thread's receive returns 0 once the socket is shut down; kvod drops the queries.
            observer.shutdownSocket()
            while !drain.isFinished { usleep(1_000) }
            observer.close()
            usleep(200_000)
        }
        print("")
        print("TCP ratio (with / without), mean of \(rounds): \(PatternBenchmark.format2(ratios.reduce(0, +) / Double(ratios.count)))")
        kill(server.pid, SIGTERM)
        _ = ChildProcesses.wait(server.pid, seconds: 10)
        exit(0)
    }

    private static func createLine(_ index: Int) -> String {
        #"{"op":"create","id":\#(index),"object":"order:\#(index)","values":{"owner":"u\#(index)","status":"open","total":\#(index),"lines":[{"sku":"a-1","qty":2},{"sku":"b-7","qty":1}]}}"#
    }

    private static func filter(_ index: Int, indexed: Bool) -> String {
        indexed ? "owner == 'u\(index)' && total >= 0" : "total > \(1_000_000_000 + index)"
    }

    /// The engine alone: nanoseconds per `set` of `order:7`'s total, best of 10 alternating batches of
    /// 20,000, without queries and with `queries` of the shape.
    private static func engineCost(queries: Int, indexed: Bool) {
        let total = try! KeyPath("total")
        let engines = [0, queries].map { count -> KVOEngine in
            let engine = KVOEngine(historyLimit: 1_000)
            var ignored: [ChangeNotification] = []
            for index in 0..<1_000 {
                let values: [String: JSONValue] = [
                    "owner": .string("u\(index)"), "status": "open", "total": .int(Int64(index)),
                    "lines": [["sku": "a-1", "qty": 2], ["sku": "b-7", "qty": 1]],
                ]
                _ = try! engine.create("order:\(index)", values: values, notifications: &ignored)
            }
            // The same events on both sides: without queries, an ordinary observation of what the one
            // matching query observes.
            if count == 0 {
                _ = try! engine.observe("order:7", keyPath: total, options: [.new, .old], connection: ConnectionID(2),
                                        notifications: &ignored)
            }
            for index in 0..<count {
                _ = try! engine.observe(pattern: ObjectIDPattern("order:*"), keyPath: total,
                                        filter: try! LiveQuery.compile(filter(index, indexed: indexed)),
                                        options: [.new, .old], connection: ConnectionID(2), notifications: &ignored)
            }
            return engine
        }
        var best = [Double.infinity, Double.infinity]
        var notifications: [ChangeNotification] = []
        var counter: Int64 = 0
        let evaluationsBefore = engines[1].liveQueryEvaluations
        let batch = indexed ? 20_000 : 20
        for _ in 0..<10 {
            for index in 0..<2 {
                let start = monotonicNanoseconds()
                for _ in 0..<batch {
                    counter += 1
                    notifications.removeAll(keepingCapacity: true)
                    _ = try! engines[index].set("order:7", keyPath: total, value: .int(counter), notifications: &notifications)
                }
                best[index] = min(best[index], Double(monotonicNanoseconds() - start) / Double(batch))
            }
        }
        let evaluations = Double(engines[1].liveQueryEvaluations - evaluationsBefore) / Double(10 * batch)
        print("| engine | \(indexed ? "indexed (`owner == 'u<q>' && total >= 0`)" : "unindexed (`total > <n>`)") | "
            + "\(PatternBenchmark.format2(best[0])) | \(PatternBenchmark.format2(best[1])) | "
            + "\(PatternBenchmark.format2(best[0] / best[1])) | \(PatternBenchmark.format2(evaluations)) |")
    }

    /// Pipelined sets of `order:7`'s total, with request ids, per second (`PipelinedSets`).
    private static func setsPerSecond(_ connection: KVOConnection, seconds: Double) -> Double {
        PipelinedSets.perSecond(connection, seconds: seconds) { index in
            #"{"op":"set","id":\#(10_000 + index),"object":"order:7","keyPath":"total","value":\#(index)}"#
        }
    }

    /// A connection holding `count` indexed live queries on `total`, one per user (`u7`'s matches `order:7`).
    private static func registerQueries(_ count: Int, port: Int) -> KVOConnection {
        let connection = PatternBenchmark.connect(port)
        var requests: [UInt8] = []
        for index in 0..<count {
            requests += Array(#"{"op":"observe","id":\#(index),"pattern":"order:*","keyPath":"total","where":"\#(filter(index, indexed: true))","options":["new","old"]}"#.utf8)
            requests.append(0x0A)
        }
        do {
            try connection.send(raw: requests)
            for _ in 0..<count {
                let reply = try connection.readMessage(timeout: 30)
                guard reply["ok"] == true else { fail("observe: \(reply)") }
            }
        } catch {
            fail("registering live queries: \(error)")
        }
        return connection
    }

    /// Reads `connection`'s events until it is closed.
    private static func drainEvents(_ connection: KVOConnection) {
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            guard let count = try? buffer.withUnsafeMutableBytes({ try connection.receiveRaw(into: $0) }), count > 0 else { return }
        }
    }
}

/// The observer connection handed to the drain thread, which alone reads it until the main thread shuts
/// its socket down (`shutdownSocket()` may be called beside a reader).
private final class DrainedConnection: @unchecked Sendable {
    let connection: KVOConnection
    init(_ connection: KVOConnection) { self.connection = connection }
}
