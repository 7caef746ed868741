import Foundation
import KVOJSON
import KVOWireProbe
import Testing

@testable import KVOTestSupport

/// The randomized fault test's last phase (issue 43, item 3): on the cluster the faults left, seeded clients hold
/// presence sessions on every node, each with an `onDisconnect` action that inserts the session's own marker into
/// one list; then one node is SIGKILLed for good while its clients hold sessions. Some of its clients resume
/// elsewhere at once, some clients of the other nodes close (their sessions detach), the rest stay. After the
/// liveness window and the graces, every session that ended has its marker in the list exactly once on both
/// surviving nodes, and no kept session's marker is there; each kept session then ends (`endSession`) and its
/// marker appears once too. About 12 s.
extension ClusterTests {
    /// Runs the phase with choices from `seed`; returns a one-line summary.
    func sessionsThroughANodeLoss(_ cluster: LocalCluster, seed: UInt64) throws -> String {
        var random = SplitMix64(state: seed)
        let victim = random.below(3)
        let survivors = (0..<3).filter { $0 != victim }
        let setup = try cluster.connect(survivors[0])
        let rev = try setup.call("create", ["object": "presence.log", "values": ["items": []]], timeout: 30)["rev"] ?? 0
        enum Fate: String { case orphaned, resumed, closed, kept }
        struct Held {
            var marker: String
            var node: Int
            var id: String
            var fate: Fate
            var connection: KVOConnection?
        }
        var held: [Held] = []
        for index in 0..<9 {
            let node = index % 3
            let connection = try cluster.connect(node)
            try connection.call("get", ["object": "presence.log", "atLeastRev": rev], timeout: 30)
            let grace = [0.5, 1, 2][random.below(3)]
            let id = try #require(try connection.call("session", ["grace": .double(grace)], timeout: 30)["session"]?.stringValue)
            let marker = "s\(index)"
            try connection.call("onDisconnect", ["request": ["op": "insert", "object": "presence.log", "keyPath": "items",
                                                            "value": .string(marker)]], timeout: 30)
            // Each node's first client has the first fate, its second the other, its third either (seeded).
            let pick = index < 3 ? 0 : index < 6 ? 1 : random.below(2)
            let fate: Fate = node == victim ? (pick == 0 ? .orphaned : .resumed) : (pick == 0 ? .closed : .kept)
            held.append(Held(marker: marker, node: node, id: id, fate: fate, connection: connection))
        }
        cluster.nodes[victim].send(signal: SIGKILL)
        let killed = Date()
        for index in held.indices {
            switch held[index].fate {
            case .resumed:
                let connection = try cluster.connect(survivors[random.below(2)])
                var reply: JSONValue = .null
                repeat {
                    reply = try connection.request("session", ["resume": .string(held[index].id)], timeout: 15)
                    if reply["ok"] == true { break }
                    usleep(100_000)
                } while Date().timeIntervalSince(killed) < 4
                #expect(reply["resumed"] == true, "\(held[index].marker): \(reply)")
                held[index].connection = connection
            case .closed:
                held[index].connection?.close()
                held[index].connection = nil
            case .orphaned, .kept:
                break
            }
        }
        // Every session that ended: the victim's orphans (its last batch + 5 s + grace) and the closed ones (grace).
        let ended = Set(held.filter { $0.fate == .orphaned || $0.fate == .closed }.map(\.marker))
        func markers(on node: Int) throws -> [String] {
            try cluster.connect(node).call("get", ["object": "presence.log", "keyPath": "items"], timeout: 30)["value"]?
                .arrayValue?.compactMap(\.stringValue) ?? []
        }
        let deadline = Date().addingTimeInterval(15)
        while Set(try markers(on: survivors[0])) != ended, Date() < deadline { usleep(200_000) }
        let took = Date().timeIntervalSince(killed)
        usleep(2_000_000)
        for node in survivors {
            let found = try markers(on: node)
            expectEqual(found.sorted(), ended.sorted(), "n\(node + 1): each ended session's action once, no kept one's (seed \(seed))")
        }
        // The kept and resumed sessions end now, each once.
        for session in held where session.fate == .kept || session.fate == .resumed {
            expectEqual(try session.connection?.call("endSession", timeout: 15)["ran"], 1, "\(session.marker)")
        }
        let all = Set(held.map(\.marker))
        let settled = Date().addingTimeInterval(10)
        while try markers(on: survivors[1]).count < all.count, Date() < settled { usleep(100_000) }
        for node in survivors {
            expectEqual(try markers(on: node).sorted(), all.sorted(), "n\(node + 1): every action exactly once (seed \(seed))")
        }
        let fates = Dictionary(grouping: held, by: \.fate.rawValue).mapValues(\.count).sorted { $0.key < $1.key }
            .map { "\($0.value) \($0.key)" }.joined(separator: ", ")
        return "sessions through the loss of n\(victim + 1): \(held.count) sessions (\(fates)); the ended ones' actions all ran \(String(format: "%.1f", took)) s after the kill, each once"
    }
}
