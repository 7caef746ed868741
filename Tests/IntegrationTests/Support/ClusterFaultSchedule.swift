import Foundation
import KVOWireProbe

@testable import KVOTestSupport

/// One fault of a randomized schedule: what, when (seconds after the schedule starts) and for how long.
struct ClusterFault: Sendable, CustomStringConvertible {
    enum Action: Sendable, Equatable {
        /// SIGKILL of kvod node i; restarted (same data directory and port) when healed.
        case killNode(Int)
        /// SIGKILL of NATS server j, or of the one leading the stream when the fault starts; restarted when healed.
        case killNATS(Int)
        case killStreamLeaderNATS
        /// SIGSTOP of kvod node i, SIGCONT when healed.
        case pauseNode(Int)
        /// SIGSTOP of NATS server j, or of the stream's leader; SIGCONT when healed.
        case pauseNATS(Int)
        case pauseStreamLeaderNATS
        /// Two NATS servers at once (the stream loses its quorum: writes wait, then are answered
        /// `unavailable`), SIGKILL and restart or SIGSTOP and SIGCONT; or SIGKILL of all three, restarted together.
        case killNATSMajority(Int, Int)
        case pauseNATSMajority(Int, Int)
        case killAllNATS
        /// kvod node i cut off from every NATS server (`LocalCluster.partitionFromNATS`: it must be the
        /// cluster's `proxiedNode`).
        case partitionNode(Int)

        var touchesNATS: Bool {
            switch self {
            case .killNATS, .killStreamLeaderNATS, .pauseNATS, .pauseStreamLeaderNATS, .killNATSMajority, .pauseNATSMajority,
                 .killAllNATS:
                return true
            case .killNode, .pauseNode, .partitionNode: return false
            }
        }
    }

    var action: Action
    var start: Double
    var hold: Double

    var description: String {
        let what: String
        switch action {
        case let .killNode(node): what = "SIGKILL kvod n\(node + 1), restart"
        case let .killNATS(server): what = "SIGKILL nats-\(server + 1), restart"
        case .killStreamLeaderNATS: what = "SIGKILL the stream leader's nats-server, restart"
        case let .pauseNode(node): what = "SIGSTOP kvod n\(node + 1), SIGCONT"
        case let .pauseNATS(server): what = "SIGSTOP nats-\(server + 1), SIGCONT"
        case .pauseStreamLeaderNATS: what = "SIGSTOP the stream leader's nats-server, SIGCONT"
        case let .killNATSMajority(first, second): what = "SIGKILL nats-\(first + 1) and nats-\(second + 1), restart"
        case let .pauseNATSMajority(first, second): what = "SIGSTOP nats-\(first + 1) and nats-\(second + 1), SIGCONT"
        case .killAllNATS: what = "SIGKILL every nats-server, restart"
        case let .partitionNode(node): what = "partition kvod n\(node + 1) from NATS, heal"
        }
        return "t=\(String(format: "%.1f", start)) s: \(what) after \(String(format: "%.1f", hold)) s"
    }

    /// A schedule of faults over `seconds` from `seed` (the same seed, the same schedule): one every 1-4 s
    /// after a 2 s start, each held 0.5-8 s by kind; at most one fault on kvod nodes and one on NATS servers
    /// at a time (two faults may overlap when one touches a kvod node and the other NATS). One fault in eight
    /// takes the stream's quorum away (two NATS servers, or all three). Partitions only of `partitionable`
    /// (the cluster's proxied node), when there is one.
    static func schedule(seed: UInt64, seconds: Double, partitionable: Int?) -> [ClusterFault] {
        var random = SplitMix64(state: seed)
        func uniform(_ low: Double, _ high: Double) -> Double { low + (high - low) * Double(random.below(1_000_000)) / 1_000_000 }
        var faults: [ClusterFault] = []
        var time = 2.0
        /// When the last fault on a kvod node and on a NATS server ends.
        var nodeFree = 0.0
        var natsFree = 0.0
        while true {
            let roll = random.below(100)
            let action: Action
            let hold: Double
            switch roll {
            case 0..<14: (action, hold) = (.killNode(random.below(3)), uniform(0.5, 3))
            case 14..<28: (action, hold) = (.killStreamLeaderNATS, uniform(1, 4))
            case 28..<35: (action, hold) = (.killNATS(random.below(3)), uniform(1, 4))
            case 35..<49: (action, hold) = (.pauseNode(random.below(3)), uniform(1, 5))
            case 49..<57: (action, hold) = (.pauseNATS(random.below(3)), uniform(1, 8))
            case 57..<70: (action, hold) = (.pauseStreamLeaderNATS, uniform(1, 5))
            case 70..<76:
                let spared = random.below(3)
                (action, hold) = (.pauseNATSMajority((spared + 1) % 3, (spared + 2) % 3), uniform(1, 4))
            case 76..<80:
                let spared = random.below(3)
                (action, hold) = (.killNATSMajority((spared + 1) % 3, (spared + 2) % 3), uniform(1, 4))
            case 80..<83: (action, hold) = (.killAllNATS, uniform(1, 3))
            default:
                if let partitionable {
                    (action, hold) = (.partitionNode(partitionable), uniform(2, 7))
                } else {
                    (action, hold) = (.killNode(random.below(3)), uniform(0.5, 3))
                }
            }
            let start = max(time, (action.touchesNATS ? natsFree : nodeFree) + 0.5)
            guard start + hold <= seconds else { break }
            faults.append(ClusterFault(action: action, start: start, hold: hold))
            if action.touchesNATS { natsFree = start + hold } else { nodeFree = start + hold }
            time = start + uniform(1, 4)
        }
        return faults
    }
}

/// Carries out a `ClusterFault` schedule on a `LocalCluster`, on the calling thread (the workload runs on
/// threads of its own), and heals everything at the end. Between steps it checks that every kvod node and
/// NATS server not under a fault is running: one that exited by itself is an incident (its status and the
/// end of its log) and is started again. Keeps every kvod process's log, the killed ones' included.
final class ClusterFaultRunner {
    let cluster: LocalCluster
    private(set) var log: [String] = []
    private(set) var incidents: [String] = []
    /// The logs of kvod processes that were replaced (killed and restarted), by node.
    private(set) var earlierLogs: [[String]] = [[], [], []]
    private(set) var faultsDone = 0
    private var started = 0.0
    /// What a fault in progress did, to undo it: the NATS servers it stopped (a leader fault resolved).
    private var resolvedNATS: [Int: [Int]] = [:]
    private var faultyNodes = Set<Int>()
    private var faultyNATS = Set<Int>()

    init(cluster: LocalCluster) {
        self.cluster = cluster
    }

    private var now: Double { monotonicSeconds() - started }

    private func note(_ line: String) {
        let stamped = "t=\(String(format: "%.1f", now)) s: \(line)"
        log.append(stamped)
        print("random faults: \(stamped)")
    }

    /// Runs `faults` (sorted by start), then heals whatever is still faulty.
    func run(_ faults: [ClusterFault]) {
        started = monotonicSeconds()
        enum Step { case start(Int), heal(Int) }
        var steps: [(time: Double, step: Step)] = []
        for (index, fault) in faults.enumerated() {
            steps.append((fault.start, .start(index)))
            steps.append((fault.start + fault.hold, .heal(index)))
        }
        // Stable: a heal at the same time as the next start goes first.
        steps = steps.enumerated().sorted { ($0.element.time, $0.offset) < ($1.element.time, $1.offset) }.map(\.element)
        for (time, step) in steps {
            let wait = time - now
            if wait > 0 { usleep(UInt32(wait * 1_000_000)) }
            switch step {
            case let .start(index): begin(faults[index], index)
            case let .heal(index): end(faults[index], index)
            }
            checkHealth()
        }
        healEverything()
    }

    private func leaderOrAny(_ index: Int) -> Int {
        if let leader = cluster.streamLeader() { return leader }
        let any = index % 3
        note("no NATS server reports a stream leader; taking nats-\(any + 1)")
        return any
    }

    /// The NATS servers a fault on NATS stops, resolving "the stream's leader" now.
    private func natsTargets(_ action: ClusterFault.Action, _ index: Int) -> [Int] {
        switch action {
        case let .killNATS(server), let .pauseNATS(server): return [server]
        case .killStreamLeaderNATS, .pauseStreamLeaderNATS: return [leaderOrAny(index)]
        case let .killNATSMajority(first, second), let .pauseNATSMajority(first, second): return [first, second]
        case .killAllNATS: return [0, 1, 2]
        case .killNode, .pauseNode, .partitionNode: return []
        }
    }

    private func names(_ servers: [Int]) -> String {
        servers.map { "nats-\($0 + 1)" }.joined(separator: " and ")
    }

    private func begin(_ fault: ClusterFault, _ index: Int) {
        let leaderNote = fault.action == .killStreamLeaderNATS || fault.action == .pauseStreamLeaderNATS ? " (the stream's leader)" : ""
        switch fault.action {
        case let .killNode(node):
            faultyNodes.insert(node)
            cluster.nodes[node].stop(signal: SIGKILL)
            note("SIGKILL kvod n\(node + 1)")
        case .killNATS, .killStreamLeaderNATS, .killNATSMajority, .killAllNATS:
            let servers = natsTargets(fault.action, index)
            resolvedNATS[index] = servers
            faultyNATS.formUnion(servers)
            for server in servers { cluster.killNATS(server) }
            note("SIGKILL \(names(servers))\(leaderNote)")
        case let .pauseNode(node):
            faultyNodes.insert(node)
            cluster.nodes[node].send(signal: SIGSTOP)
            note("SIGSTOP kvod n\(node + 1)")
        case .pauseNATS, .pauseStreamLeaderNATS, .pauseNATSMajority:
            let servers = natsTargets(fault.action, index)
            resolvedNATS[index] = servers
            faultyNATS.formUnion(servers)
            for server in servers { cluster.signalNATS(server, SIGSTOP) }
            note("SIGSTOP \(names(servers))\(leaderNote)")
        case let .partitionNode(node):
            faultyNodes.insert(node)
            cluster.partitionFromNATS()
            note("partition kvod n\(node + 1) from NATS")
        }
        faultsDone += 1
    }

    private func end(_ fault: ClusterFault, _ index: Int) {
        switch fault.action {
        case let .killNode(node):
            restartNode(node, why: "restarted")
            faultyNodes.remove(node)
        case .killNATS, .killStreamLeaderNATS, .killNATSMajority, .killAllNATS:
            let servers = resolvedNATS[index]!
            for server in servers { restartNATS(server) }
            faultyNATS.subtract(servers)
        case let .pauseNode(node):
            cluster.nodes[node].send(signal: SIGCONT)
            note("SIGCONT kvod n\(node + 1)")
            faultyNodes.remove(node)
        case .pauseNATS, .pauseStreamLeaderNATS, .pauseNATSMajority:
            let servers = resolvedNATS[index]!
            for server in servers { cluster.signalNATS(server, SIGCONT) }
            note("SIGCONT \(names(servers))")
            faultyNATS.subtract(servers)
        case let .partitionNode(node):
            cluster.healPartition()
            note("heal the partition of kvod n\(node + 1)")
            faultyNodes.remove(node)
        }
    }

    /// Starts kvod node `node` again (its process has exited), retrying a refused start a few times.
    private func restartNode(_ node: Int, why: String) {
        earlierLogs[node].append(cluster.nodes[node].log)
        for attempt in 1...5 {
            do {
                let began = monotonicSeconds()
                try cluster.restart(node, after: SIGKILL)
                note("kvod n\(node + 1) \(why) in \(String(format: "%.2f", monotonicSeconds() - began)) s")
                return
            } catch {
                incidents.append("t=\(String(format: "%.1f", now)) s: kvod n\(node + 1) did not start (attempt \(attempt)): \(String("\(error)".suffix(1500)))")
                note("kvod n\(node + 1) did not start: \(String("\(error)".suffix(300)))")
                usleep(1_000_000)
            }
        }
    }

    private func restartNATS(_ server: Int) {
        for attempt in 1...5 {
            do {
                try cluster.restartNATS(server)
                note("nats-\(server + 1) restarted")
                return
            } catch {
                incidents.append("t=\(String(format: "%.1f", now)) s: nats-\(server + 1) did not start (attempt \(attempt)): \(error)")
                usleep(1_000_000)
            }
        }
    }

    /// A kvod node or NATS server not under a fault that is not running exited by itself: an incident.
    private func checkHealth() {
        for node in 0..<cluster.nodes.count where !faultyNodes.contains(node) && !cluster.nodes[node].process.isRunning {
            let process = cluster.nodes[node].process
            let status = process.terminationStatus
            let tail = cluster.nodes[node].log.split(separator: "\n").suffix(8).joined(separator: "\n")
            incidents.append("t=\(String(format: "%.1f", now)) s: kvod n\(node + 1) exited by itself (status \(status)); its log ends:\n\(tail)")
            note("kvod n\(node + 1) exited by itself (status \(status)); restarting it")
            restartNode(node, why: "restarted after exiting by itself")
        }
        for server in 0..<3 where !faultyNATS.contains(server) && !cluster.isNATSRunning(server) {
            incidents.append("t=\(String(format: "%.1f", now)) s: nats-\(server + 1) exited by itself: \(cluster.natsLog(server).suffix(800))")
            note("nats-\(server + 1) exited by itself; restarting it")
            restartNATS(server)
        }
    }

    /// Ends every fault still in force (a schedule cut short) and checks every process once more.
    func healEverything() {
        cluster.healPartition()
        for node in 0..<cluster.nodes.count { cluster.nodes[node].send(signal: SIGCONT) }
        for server in 0..<3 { cluster.signalNATS(server, SIGCONT) }
        for node in faultyNodes where !cluster.nodes[node].process.isRunning { restartNode(node, why: "restarted at the end") }
        for server in faultyNATS where !cluster.isNATSRunning(server) { restartNATS(server) }
        faultyNodes.removeAll()
        faultyNATS.removeAll()
        checkHealth()
        note("every fault healed")
    }
}
