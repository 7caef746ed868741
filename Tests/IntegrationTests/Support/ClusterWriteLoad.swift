import Foundation
import KVOWireProbe
import KVOJSON

/// Concurrent writers loading a cluster for the fault tests (ClusterLoadTests): each client appends
/// its own values (`c<client>-<n>`, n counting up) to one array with `insert`, on its own connection and
/// thread, `pipeline` requests at a time (sent together, then their replies read in order). A client
/// whose node goes away reconnects to its next port and goes on with its next values; the values it had
/// sent without an answer are `unconfirmed` (applied or not: the tests accept either, once).
///
/// Records every acknowledged write (value, revision, monotonic time of the reply), every write
/// without an `ok` reply, and anything unexpected (a reply out of request order, a client that could
/// not reconnect). `start` from the test's thread; the records are read under a lock from any thread.
final class ClusterWriteLoad: @unchecked Sendable {
    /// One client: the node ports it tries in turn (the first, then the next on connection loss), how
    /// many requests it has in flight at once, and how many writes it makes.
    struct Client: Sendable {
        var ports: [Int]
        var pipeline: Int
        var writes: Int
    }

    /// An `ok` reply.
    struct Ack: Sendable {
        var value: String
        var rev: Int64
        /// `monotonicSeconds()` when the reply was read.
        var time: Double
    }

    let clients: [Client]
    let object: String
    let keyPath: String
    /// Seconds a client waits for one reply.
    let replyTimeout: Double
    private let lock = NSLock()
    private var acks: [Ack] = []
    private var unconfirmedValues: [String] = []
    private var errorReplies: [String] = []
    private var problemLog: [String] = []
    private var reconnectLog: [String] = []
    private let group = DispatchGroup()

    init(clients: [Client], object: String, keyPath: String, replyTimeout: Double = 30) {
        self.clients = clients
        self.object = object
        self.keyPath = keyPath
        self.replyTimeout = replyTimeout
    }

    /// The value client `client` writes `n`-th.
    static func value(client: Int, _ n: Int) -> String { "c\(client)-\(n)" }

    /// Starts every client on a thread of its own.
    func start() {
        for (index, client) in clients.enumerated() {
            group.enter()
            Thread.detachNewThread { [self] in
                run(index, client)
                group.leave()
            }
        }
    }

    /// Waits until every client has made all its writes (or given up); false on timeout.
    @discardableResult
    func wait(timeout: Double = 60) -> Bool {
        group.wait(timeout: .now() + timeout) == .success
    }

    /// Waits until `count` writes are acknowledged; false on timeout.
    @discardableResult
    func waitForAcks(_ count: Int, timeout: Double = 30) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while ackCount < count {
            guard Date() < deadline else { return false }
            usleep(5_000)
        }
        return true
    }

    var ackCount: Int { locked { acks.count } }
    /// The acknowledged writes, in the order their replies were read (across clients, roughly).
    var acknowledged: [Ack] { locked { acks } }
    /// Values sent without an `ok` reply (an error reply, or the connection lost first).
    var unconfirmed: [String] { locked { unconfirmedValues } }
    /// The error replies (`ok: false`), as JSON.
    var errors: [String] { locked { errorReplies } }
    /// What went wrong that no fault explains (replies out of order, no node to reconnect to).
    var problems: [String] { locked { problemLog } }
    /// One line per reconnection: which client moved from which port to which.
    var reconnections: [String] { locked { reconnectLog } }

    /// Every value any client sent.
    var sentValues: Set<String> {
        var all = Set<String>()
        for (index, client) in clients.enumerated() {
            for n in 0..<client.writes { all.insert(ClusterWriteLoad.value(client: index, n)) }
        }
        return all
    }

    /// The longest time between two consecutive acknowledgements, all clients together, and when it
    /// ended (seconds after the first one).
    var longestPause: (seconds: Double, endingAfter: Double) {
        let times = acknowledged.map(\.time).sorted()
        guard let first = times.first else { return (0, 0) }
        var longest = (seconds: 0.0, endingAfter: 0.0)
        for (earlier, later) in zip(times, times.dropFirst()) where later - earlier > longest.seconds {
            longest = (later - earlier, later - first)
        }
        return longest
    }

    private func locked<T>(_ body: () -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body()
    }

    private func run(_ index: Int, _ client: Client) {
        var portIndex = 0
        var connection: KVOConnection? = try? KVOConnection(host: "127.0.0.1", port: client.ports[0])
        var next = 0
        var requestID: Int64 = 0
        while next < client.writes {
            guard let current = connection else {
                // Move on to the next port (a node killed): retry each for a while.
                portIndex += 1
                guard portIndex < client.ports.count else {
                    locked { problemLog.append("client \(index): no node left to connect to") }
                    return
                }
                connection = try? KVOConnection(host: "127.0.0.1", port: client.ports[portIndex])
                let moved = "client \(index): port \(client.ports[portIndex - 1]) -> \(client.ports[portIndex]) before write \(next)"
                locked { reconnectLog.append(moved) }
                continue
            }
            let values = (next..<min(next + client.pipeline, client.writes)).map { ClusterWriteLoad.value(client: index, $0) }
            next += values.count
            var answered = 0
            do {
                let firstID = requestID + 1
                for value in values {
                    requestID += 1
                    try current.send(.object(["op": "insert", "id": .int(requestID), "object": .string(object),
                                              "keyPath": .string(keyPath), "value": .string(value)]))
                }
                for (offset, value) in values.enumerated() {
                    let reply = try current.readMessage(timeout: replyTimeout)
                    answered += 1
                    let time = monotonicSeconds()
                    if reply["id"] != .int(firstID + Int64(offset)) {
                        locked { problemLog.append("client \(index): reply \(reply) out of order (expected id \(firstID + Int64(offset)))") }
                    }
                    if reply["ok"] == true, let rev = reply["rev"]?.intValue {
                        locked { acks.append(Ack(value: value, rev: rev, time: time)) }
                    } else {
                        locked {
                            unconfirmedValues.append(value)
                            errorReplies.append(reply.description)
                        }
                    }
                }
            } catch {
                // The node went away (or did not answer in time): what was not answered is unconfirmed.
                locked { unconfirmedValues += values[answered...] }
                current.close()
                connection = nil
            }
        }
    }
}
