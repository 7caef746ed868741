import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Availability figures (docs/design.md, "Availability under faults"), not a pass/fail test: with
/// `KVOD_AVAILABILITY_RUNS=N` (and, for the figures docs/ quotes, `KVOD_TEST_BINARIES=.build/release` so the
/// nodes are release builds) it measures, N times each, the time from a fault to the first write acknowledged
/// after it, beside JetStream's own leader election measured in the same runs:
/// - the NATS server leading the stream killed (SIGKILL), a writer on n1;
/// - that server frozen (SIGSTOP) until another is elected (at least 3 s), then thawed: the longest pause
///   between acknowledgements while it is frozen and in the 10 s after the thaw;
/// - kvod n3 killed under a writer, which reconnects to n1;
/// - n3 cut off from NATS for 5 s (`NATSFaultRelay.blackhole`): the longest pause on n1 meanwhile, and the time
///   from the heal to n3's first acknowledged write.
/// It prints p50 and max of each. Skipped without the variable (CI does not run it).
extension ClusterTests {
    /// A writer on one node: sequential sets (request ids, a nested key path), each acknowledgement's time.
    private final class AckTimeline: @unchecked Sendable {
        private let lock = NSLock()
        private var acks: [Double] = []
        private var stopped = false
        private var thread: Thread?
        private let finished = DispatchSemaphore(value: 0)

        init(connect: @escaping @Sendable () throws -> KVOConnection) {
            thread = Thread { [self] in
                defer { finished.signal() }
                var counter = 0
                var connection: KVOConnection?
                while !isStopped {
                    do {
                        if connection == nil { connection = try connect() }
                        counter += 1
                        let reply = try connection!.request("set", ["object": "w", "keyPath": "stats.last",
                                                                    "value": ["n": .int(Int64(counter)), "at": "x"]], timeout: 15)
                        if reply["ok"] == true { lock.withLock { acks.append(monotonicSeconds()) } } else { usleep(20_000) }
                    } catch {
                        connection = nil
                        usleep(20_000)
                    }
                }
            }
            thread!.start()
        }

        private var isStopped: Bool { lock.withLock { stopped } }

        /// Stops the writer and waits for its thread (at most its request's 15 s), so that nothing holds the
        /// cluster once the test ends (its processes are stopped when it goes away).
        func stop() {
            lock.withLock { stopped = true }
            finished.wait()
        }

        /// The first acknowledgement at or after `time`, as seconds after it (nil: none by `timeout`).
        func firstAck(after time: Double, timeout: Double = 40) -> Double? {
            let deadline = monotonicSeconds() + timeout
            while monotonicSeconds() < deadline {
                if let ack = lock.withLock({ acks.first { $0 >= time } }) { return ack - time }
                usleep(5_000)
            }
            return nil
        }

        /// The longest pause between acknowledgements (or from `start`) within `start...end`.
        func longestPause(from start: Double, to end: Double) -> Double {
            let times = [start] + lock.withLock { acks.filter { $0 > start && $0 <= end } } + [end]
            return zip(times, times.dropFirst()).map { $1 - $0 }.max() ?? (end - start)
        }
    }

    /// Seconds until a running NATS server other than `excluded` reports a stream leader other than `old`.
    private static func electionTime(_ cluster: LocalCluster, from start: Double, excluding excluded: Int, old: Int) -> Double? {
        while monotonicSeconds() - start < 40 {
            for index in 0..<3 where index != excluded {
                if let leader = cluster.streamDetail(monitorPort: cluster.monitorPorts[index])?["cluster"]?["leader"]?.stringValue,
                   leader.hasPrefix("nats-"), let number = Int(leader.dropFirst(5)), number - 1 != old {
                    return monotonicSeconds() - start
                }
            }
            usleep(10_000)
        }
        return nil
    }

    private static func summary(_ label: String, _ values: [Double?]) -> String {
        let known = values.compactMap { $0 }.sorted()
        guard !known.isEmpty else { return "| \(label) | - | - | 0/\(values.count) |" }
        let format = { (value: Double) in String(format: "%.2f", value) }
        return "| \(label) | \(format(known[known.count / 2])) | \(format(known.last!)) | \(known.count)/\(values.count) |"
    }

    static let availabilityRuns = Int(ProcessInfo.processInfo.environment["KVOD_AVAILABILITY_RUNS"] ?? "") ?? 0

    @Test("availability figures: time to the first acknowledged write after each fault (KVOD_AVAILABILITY_RUNS)",
          .enabled(if: ClusterTests.availabilityRuns > 0))
    func availabilityFigures() throws {
        let runs = Self.availabilityRuns
        let cluster = try LocalCluster(label: "availability", kvodArguments: ["--cluster-write-timeout", "30"], relayedNode: 2)
        try cluster.waitUntilReady()
        try cluster.connect(0).call("create", ["object": "w", "values": ["stats": [:]]])
        try cluster.waitForConvergence()
        var rows: [String] = []

        var leaderAck: [Double?] = [], leaderElection: [Double?] = []
        var freezeAck: [Double?] = [], freezeElection: [Double?] = [], thawPause: [Double?] = []
        for _ in 0..<runs {
            let writer = AckTimeline { try cluster.connect(0) }
            sleep(1)
            guard let leader = cluster.streamLeader() else { continue }
            let killed = monotonicSeconds()
            cluster.killNATS(leader)
            leaderElection.append(Self.electionTime(cluster, from: killed, excluding: leader, old: leader))
            leaderAck.append(writer.firstAck(after: killed))
            try cluster.restartNATS(leader)
            sleep(3)
            guard let frozen = cluster.streamLeader() else { writer.stop(); continue }
            let freeze = monotonicSeconds()
            cluster.signalNATS(frozen, SIGSTOP)
            freezeElection.append(Self.electionTime(cluster, from: freeze, excluding: frozen, old: frozen))
            let elapsed = monotonicSeconds() - freeze
            if elapsed < 3 { usleep(UInt32((3 - elapsed) * 1e6)) }
            cluster.signalNATS(frozen, SIGCONT)
            let thaw = monotonicSeconds()
            sleep(10)
            freezeAck.append(writer.longestPause(from: freeze, to: thaw))
            thawPause.append(writer.longestPause(from: thaw, to: monotonicSeconds()))
            writer.stop()
            sleep(2)
        }
        rows += [Self.summary("stream leader killed: first acknowledgement (s)", leaderAck),
                 Self.summary("stream leader killed: JetStream's new leader (s)", leaderElection),
                 Self.summary("stream leader frozen: longest pause while frozen (s)", freezeAck),
                 Self.summary("stream leader frozen: JetStream's new leader (s)", freezeElection),
                 Self.summary("after the thaw: longest pause in 10 s (s)", thawPause)]

        var nodeKill: [Double?] = []
        for _ in 0..<runs {
            let writer = AckTimeline { [cluster] in
                // n3 while it runs, then n1: a client failing over.
                if let connection = try? cluster.nodes[2].connect() { return connection }
                return try cluster.connect(0)
            }
            sleep(1)
            let killed = monotonicSeconds()
            cluster.nodes[2].stop(signal: SIGKILL)
            nodeKill.append(writer.firstAck(after: killed))
            writer.stop()
            try cluster.restart(2, after: SIGKILL)
            try cluster.waitForConvergence(timeout: 30)
        }
        rows.append(Self.summary("kvod n3 killed: its writer's first acknowledgement on n1 (s)", nodeKill))

        var partitionPause: [Double?] = [], healAck: [Double?] = []
        for _ in 0..<runs {
            let writer = AckTimeline { try cluster.connect(0) }
            sleep(1)
            let cut = monotonicSeconds()
            for relay in cluster.relays { relay.blackhole(true) }
            sleep(5)
            partitionPause.append(writer.longestPause(from: cut, to: monotonicSeconds()))
            for relay in cluster.relays { relay.cut() }
            for relay in cluster.relays { relay.clear() }
            let healed = monotonicSeconds()
            let partitioned = AckTimeline { try cluster.nodes[2].connect() }
            healAck.append(partitioned.firstAck(after: healed))
            partitioned.stop()
            writer.stop()
            try cluster.waitForConvergence(timeout: 30)
        }
        rows += [Self.summary("n3 cut off from NATS 5 s: longest pause on n1 (s)", partitionPause),
                 Self.summary("n3 cut off from NATS: first acknowledgement on n3 after the heal (s)", healAck)]

        print("""
            availability, \(runs) runs each, nodes from \(BuiltProducts.directory.path):
            | fault | p50 | max | runs with a figure |
            |---|---:|---:|---:|
            \(rows.joined(separator: "\n"))
            """)
        let digests = try cluster.waitForConvergence(timeout: 30)
        expectEqual(Set(digests.map { $0["digest"]?.stringValue ?? "" }).count, 1, "\(digests)")
    }
}
