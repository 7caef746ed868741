import Foundation
import KVOJSON
import KVOWireProbe

/// The clients of the randomized fault test (ClusterRandomFaultTests), in the spirit of Jepsen's list-append
/// workload; what they record is a `ListAppendHistory` for `ListAppendChecker`.
///
/// - **Writers**, `writersPerNode` on every node, each a thread with its own connection to its node: one
///   write at a time or a few pipelined (`pipelines`), each an `insert` of a unique value (`w<client>-<counter>`) into a list (`items` of
///   `l<epoch>-<k>`: the lists of the current epoch, a new set every `epochSeconds`, so that no list grows
///   past a few thousand elements however long the run) or, one time in `1 / setShare`, a `set` of a register
///   (`v` of `r<k>`). Each write is recorded with its invocation and completion time and its outcome: `ok`
///   with its revision, refused (an error other than `unavailable`), or indeterminate (`unavailable`, no
///   reply within `replyTimeout`, the connection lost). A writer whose connection fails reconnects to its
///   own node, retrying until the node is back.
/// - **Readers**, one a node: a writer hands some of its acknowledged writes (`readShare`) to the reader of
///   another node, which reads the object there with `atLeastRev` set to the write's revision and records
///   what it got (a list as its length and prefix hash).
/// - **Observers**, one a node: a pattern observation of every list (`l*`, key path `items`) from the
///   revision after the set-up; on a lost connection it observes again with `sinceRev` (and `atLeastRev`)
///   set to the last revision it heard, and records every event.
///
/// `start`, `stop…` and `history` from the test's thread; the records are kept under one lock.
final class ListAppendWorkload: @unchecked Sendable {
    struct Configuration: Sendable {
        /// The nodes' client ports (0 is n1).
        var ports: [Int]
        var writersPerNode = 3
        var listsPerEpoch = 4
        var registers = 3
        var epochSeconds = 10.0
        /// How many epochs of lists `setUp` creates: the run must end within `epochs * epochSeconds`
        /// (writers stay on the last epoch's lists after that).
        var epochs: Int
        /// The share of writes that set a register (the rest append).
        var setShare = 0.2
        /// The share of acknowledged writes read back on another node.
        var readShare = 0.25
        /// Seconds a client waits for a reply (more than kvod's `--cluster-write-timeout`).
        var replyTimeout = 10.0
        /// A writer's pause between writes (or pipelines of writes): random, up to twice this, in milliseconds.
        var thinkMilliseconds = 2
        /// How many writes each writer of a node sends at most before reading their replies (a random number
        /// from 1 to this, each time), by the writer's index on its node: pipelined writes on one connection
        /// are answered in request order, with revisions in that order.
        var pipelines = [1, 4, 1]
        var seed: UInt64
    }

    static let listPattern = "l*"

    static func listName(epoch: Int, index: Int) -> String { "l\(epoch)-\(index)" }
    static func registerName(_ index: Int) -> String { "r\(index)" }

    let configuration: Configuration
    private let lock = NSLock()
    private var operations: [ListAppendHistory.Operation] = []
    private var reads: [ListAppendHistory.Read] = []
    private var observerLogs: [ListAppendHistory.ObserverLog]
    /// Each observer's rebuilt list lengths (what it heard), to tell when it has caught up.
    private var observerCounts: [[String: Int]]
    /// Each node's reader's acknowledged writes to read back, oldest first (a few at most).
    private var mailboxes: [[(object: String, kind: ListAppendHistory.Kind, value: String, rev: Int64)]]
    private var stopWriting = false
    private var stopReading = false
    private var stopObserving = false
    private let writers = DispatchGroup()
    private let readers = DispatchGroup()
    private let observers = DispatchGroup()
    private var startTime = 0.0

    init(_ configuration: Configuration) {
        self.configuration = configuration
        observerLogs = configuration.ports.indices.map { ListAppendHistory.ObserverLog(node: $0, events: []) }
        observerCounts = configuration.ports.map { _ in [:] }
        mailboxes = configuration.ports.map { _ in [] }
    }

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    /// Every list and register object, in creation order.
    var objects: (lists: [String], registers: [String]) {
        let lists = (0..<configuration.epochs).flatMap { epoch in
            (0..<configuration.listsPerEpoch).map { ListAppendWorkload.listName(epoch: epoch, index: $0) }
        }
        return (lists, (0..<configuration.registers).map(ListAppendWorkload.registerName))
    }

    /// Creates every list (`{"items": []}`) and register (`{}`) through `connection`; returns the revision
    /// after the last.
    func setUp(through connection: KVOConnection) throws -> Int64 {
        var rev: Int64 = 0
        for list in objects.lists {
            rev = try connection.call("create", ["object": .string(list), "values": ["items": []]], timeout: 30)["rev"]?.intValue ?? rev
        }
        for register in objects.registers {
            rev = try connection.call("create", ["object": .string(register)], timeout: 30)["rev"]?.intValue ?? rev
        }
        return rev
    }

    /// Starts the observers (from `baseRev`, the revision after `setUp`), the readers and the writers.
    func start(baseRev: Int64) {
        startTime = monotonicSeconds()
        for node in configuration.ports.indices {
            observers.enter()
            Thread.detachNewThread { [self] in
                observe(node, from: baseRev)
                observers.leave()
            }
            readers.enter()
            Thread.detachNewThread { [self] in
                read(node)
                readers.leave()
            }
        }
        for node in configuration.ports.indices {
            for writer in 0..<configuration.writersPerNode {
                let client = node * configuration.writersPerNode + writer
                let pipeline = configuration.pipelines[writer % configuration.pipelines.count]
                writers.enter()
                Thread.detachNewThread { [self] in
                    write(client, node: node, pipeline: pipeline)
                    writers.leave()
                }
            }
        }
    }

    /// Stops the writers after their current write (answered or timed out); false if one did not stop in time.
    @discardableResult
    func stopWriters(timeout: Double) -> Bool {
        locked { stopWriting = true }
        return writers.wait(timeout: .now() + timeout) == .success
    }

    /// Tells every writer, reader and observer to stop, without waiting (a test that throws half-way).
    func stopAll() {
        locked {
            stopWriting = true
            stopReading = true
            stopObserving = true
        }
    }

    /// Stops the readers after their current read.
    @discardableResult
    func stopReaders(timeout: Double) -> Bool {
        locked { stopReading = true }
        return readers.wait(timeout: .now() + timeout) == .success
    }

    /// Waits until every observer's rebuilt lists hold `elements` elements together (what the nodes' lists
    /// hold at the end), then stops them; false if one had not caught up within `timeout`.
    @discardableResult
    func stopObservers(whenEachHeard elements: Int, timeout: Double) -> Bool {
        let deadline = monotonicSeconds() + timeout
        var caughtUp = false
        while !caughtUp, monotonicSeconds() < deadline {
            caughtUp = locked { observerCounts.allSatisfy { $0.values.reduce(0, +) == elements } }
            if !caughtUp { usleep(50_000) }
        }
        locked { stopObserving = true }
        observers.wait()
        return caughtUp
    }

    /// For each node, when its writers' first write acknowledged after `time` was (nil: none yet).
    func firstAcknowledgements(after time: Double) -> [Double?] {
        locked {
            var first = [Double?](repeating: nil, count: configuration.ports.count)
            for operation in operations where operation.completed > time {
                guard case .ok = operation.outcome else { continue }
                first[operation.node] = min(first[operation.node] ?? operation.completed, operation.completed)
            }
            return first
        }
    }

    /// The history recorded, with the nodes' final states and the fault schedule's incidents.
    func history(finals: [ListAppendHistory.FinalState], incidents: [String]) -> ListAppendHistory {
        locked {
            ListAppendHistory(operations: operations, reads: reads, observers: observerLogs, finals: finals, incidents: incidents)
        }
    }

    /// What node `node` (at `port`) holds: every list, every register and its digest. Call once writes
    /// have stopped and every node has applied the whole stream.
    static func finalState(node: Int, port: Int, lists: [String], registers: [String]) throws -> ListAppendHistory.FinalState {
        let connection = try KVOConnection(host: "127.0.0.1", port: port)
        defer { connection.close() }
        var state = ListAppendHistory.FinalState(node: node, lists: [:], registers: [:], digest: "", rev: 0)
        for list in lists {
            let value = try connection.call("get", ["object": .string(list), "keyPath": "items"], timeout: 30)["value"]
            state.lists[list] = value?.arrayValue?.map { $0.stringValue ?? $0.description } ?? []
        }
        for register in registers {
            if let value = try connection.call("get", ["object": .string(register), "keyPath": "v"], timeout: 30)["value"], value != .null {
                state.registers[register] = value.stringValue ?? value.description
            }
        }
        let digest = try connection.call("digest", [:], timeout: 30)
        state.digest = digest["digest"]?.stringValue ?? ""
        state.rev = digest["rev"]?.intValue ?? -1
        return state
    }

    // MARK: Writers

    private func write(_ client: Int, node: Int, pipeline: Int) {
        var random = SplitMix64(state: configuration.seed &+ UInt64(client + 1) &* 0x9E37_79B9_7F4A_7C15)
        var connection: KVOConnection?
        var counter = 0
        var requestID: Int64 = 0
        while !locked({ stopWriting }) {
            guard let current = connection ?? (try? KVOConnection(host: "127.0.0.1", port: configuration.ports[node])) else {
                usleep(100_000)
                continue
            }
            connection = current
            // Up to `pipeline` writes sent together, then their replies read in order.
            var sent: [ListAppendHistory.Operation] = []
            var lost: (any Error)?
            for _ in 0..<(1 + random.below(pipeline)) {
                let epoch = min(Int((monotonicSeconds() - startTime) / configuration.epochSeconds), configuration.epochs - 1)
                let isSet = Double(random.below(1000)) < configuration.setShare * 1000
                let object = isSet ? ListAppendWorkload.registerName(random.below(configuration.registers))
                    : ListAppendWorkload.listName(epoch: epoch, index: random.below(configuration.listsPerEpoch))
                let value = "w\(client)-\(counter)"
                counter += 1
                requestID += 1
                let request: JSONValue = isSet
                    ? ["op": "set", "id": .int(requestID), "object": .string(object), "keyPath": "v", "value": .string(value)]
                    : ["op": "insert", "id": .int(requestID), "object": .string(object), "keyPath": "items", "value": .string(value)]
                sent.append(ListAppendHistory.Operation(client: client, node: node, kind: isSet ? .set : .append, object: object, value: value,
                                                        invoked: monotonicSeconds(), completed: 0,
                                                        outcome: .indeterminate(reason: "no reply", notMade: false)))
                do {
                    try current.send(request)
                } catch {
                    lost = error
                    break
                }
            }
            var answered = 0
            while lost == nil, answered < sent.count {
                do {
                    let reply = try current.readMessage(timeout: configuration.replyTimeout)
                    // Replies come in request order; anything else (there are no observations here) is skipped.
                    guard reply["id"] == .int(requestID - Int64(sent.count - 1 - answered)) else { continue }
                    let outcome: ListAppendHistory.Outcome
                    if reply["ok"] == true, let rev = reply["rev"]?.intValue {
                        outcome = .ok(rev: rev)
                    } else if reply["error"]?["code"] == "unavailable" {
                        let message = reply["error"]?["message"]?.stringValue ?? ""
                        outcome = .indeterminate(reason: "unavailable: \(message)", notMade: message.contains("the write was not made"))
                    } else {
                        outcome = .failed(code: reply["error"]?["code"]?.stringValue ?? reply.description)
                    }
                    sent[answered].outcome = outcome
                    sent[answered].completed = monotonicSeconds()
                    answered += 1
                } catch {
                    lost = error
                }
            }
            if let lost {
                // The node went away or did not answer in time: what was not answered may or may not be applied.
                for index in answered..<sent.count {
                    sent[index].outcome = .indeterminate(reason: "\(lost)", notMade: false)
                    sent[index].completed = monotonicSeconds()
                }
                current.close()
                connection = nil
            }
            var readBack: [(node: Int, operation: ListAppendHistory.Operation)] = []
            for operation in sent {
                let readOn = (node + 1 + random.below(configuration.ports.count - 1)) % configuration.ports.count
                if case .ok = operation.outcome, Double(random.below(1000)) < configuration.readShare * 1000 {
                    readBack.append((readOn, operation))
                }
            }
            locked {
                operations += sent
                for (readOn, operation) in readBack {
                    guard case let .ok(rev) = operation.outcome else { continue }
                    mailboxes[readOn].append((operation.object, operation.kind, operation.value, rev))
                    if mailboxes[readOn].count > 16 { mailboxes[readOn].removeFirst() }
                }
            }
            if configuration.thinkMilliseconds > 0 {
                usleep(UInt32(random.below(2 * configuration.thinkMilliseconds * 1000)))
            }
        }
        connection?.close()
    }

    // MARK: Readers

    private func read(_ node: Int) {
        var connection: KVOConnection?
        while true {
            let next: (object: String, kind: ListAppendHistory.Kind, value: String, rev: Int64)?? = locked {
                if stopReading { return .none }
                return .some(mailboxes[node].isEmpty ? nil : mailboxes[node].removeFirst())
            }
            guard let item = next else { break }
            guard let item else {
                usleep(5_000)
                continue
            }
            guard let current = connection ?? (try? KVOConnection(host: "127.0.0.1", port: configuration.ports[node])) else {
                record(ListAppendHistory.Read(node: node, object: item.object, expectedValue: item.value, atLeastRev: item.rev, rev: -1,
                                              result: .failed("cannot connect")))
                usleep(100_000)
                continue
            }
            connection = current
            let keyPath = item.kind == .append ? "items" : "v"
            var read = ListAppendHistory.Read(node: node, object: item.object, expectedValue: item.value, atLeastRev: item.rev, rev: -1,
                                              result: .failed(""))
            do {
                let reply = try current.request("get", ["object": .string(item.object), "keyPath": .string(keyPath),
                                                        "atLeastRev": .int(item.rev)], timeout: configuration.replyTimeout)
                if reply["ok"] == true, let rev = reply["rev"]?.intValue {
                    read.rev = rev
                    let value = reply["value"] ?? .null
                    if item.kind == .append {
                        let elements = value.arrayValue?.map { $0.stringValue ?? $0.description } ?? []
                        read.result = .list(count: elements.count, hash: ListAppendHistory.prefixHash(elements),
                                            sawExpected: elements.contains(item.value))
                    } else {
                        read.result = .register(value == .null ? nil : value.stringValue ?? value.description)
                    }
                } else {
                    read.result = .failed(reply["error"]?["code"]?.stringValue ?? reply.description)
                }
            } catch {
                read.result = .failed("\(error)")
                current.close()
                connection = nil
            }
            record(read)
        }
        connection?.close()
    }

    private func record(_ read: ListAppendHistory.Read) {
        locked { reads.append(read) }
    }

    // MARK: Observers

    private func observe(_ node: Int, from baseRev: Int64) {
        var connection: KVOConnection?
        var lastRev = baseRev
        var first = true
        while !locked({ stopObserving }) {
            guard let current = connection else {
                do {
                    let fresh = try KVOConnection(host: "127.0.0.1", port: configuration.ports[node])
                    try fresh.call("observe", ["pattern": .string(ListAppendWorkload.listPattern), "keyPath": "items", "options": ["new"],
                                               "sinceRev": .int(lastRev), "atLeastRev": .int(lastRev)], timeout: configuration.replyTimeout)
                    if !first { append(.resumed(sinceRev: lastRev), observer: node) }
                    first = false
                    connection = fresh
                } catch {
                    usleep(100_000)
                }
                continue
            }
            do {
                guard let event = try current.nextEvent(timeout: 0.5) else { continue }
                let rev = event["rev"]?.intValue ?? -1
                let object = event["object"]?.stringValue ?? ""
                let change = event["change"]
                let values = change?["new"]?.arrayValue?.map { $0.stringValue ?? $0.description }
                let recorded: ListAppendHistory.ObserverEvent
                if event["event"] == "change", event["reason"] == "resync", let values {
                    recorded = .resync(rev: rev, object: object, values: values)
                } else if event["event"] == "change", event["reason"] == "valueChanged", change?["kind"] == 2,
                          let index = change?["indexes"]?.arrayValue?.first?.intValue, let values {
                    recorded = .insert(rev: rev, object: object, index: Int(index), values: values)
                } else {
                    recorded = .unexpected(event.description)
                }
                lastRev = max(lastRev, rev)
                append(recorded, observer: node)
            } catch {
                current.close()
                connection = nil
            }
        }
        connection?.close()
    }

    private func append(_ event: ListAppendHistory.ObserverEvent, observer: Int) {
        locked {
            observerLogs[observer].events.append(event)
            switch event {
            case let .insert(_, object, index, values): observerCounts[observer][object] = index + values.count
            case let .resync(_, object, values): observerCounts[observer][object] = values.count
            case .resumed, .unexpected: break
            }
        }
    }
}
