/// What a list-append run recorded (`ListAppendWorkload`, in the spirit of Jepsen's list-append workload):
/// every write the clients made with its outcome, the reads made with `atLeastRev` on other nodes, what each
/// observer heard, and what every node held at the end. Plain values, so that `ListAppendChecker`'s own
/// tests build histories by hand, each with one anomaly in it.
///
/// Values are unique strings (`w<client>-<counter>`); a list is the array `items` of an object, only ever
/// appended to (`insert` without an index); a register is the key `v` of an object, only ever `set`.
struct ListAppendHistory: Sendable {
    enum Kind: String, Sendable {
        case append
        case set
    }

    enum Outcome: Sendable, Equatable {
        /// `ok`, with the write's revision.
        case ok(rev: Int64)
        /// An error reply other than `unavailable`: the write was refused and changed nothing.
        case failed(code: String)
        /// `unavailable`, no reply in time, or the connection lost: the write may or may not have been
        /// applied. `notMade`: the reply said it never left the node ("the write was not made"), which the
        /// protocol promises means it is not applied.
        case indeterminate(reason: String, notMade: Bool)
    }

    /// One write.
    struct Operation: Sendable {
        var client: Int
        /// The node the client sent it to (0 is n1).
        var node: Int
        var kind: Kind
        var object: String
        var value: String
        /// Seconds on one monotonic clock (every client is a thread of one process), taken before the
        /// request was sent and after its reply was read.
        var invoked: Double
        var completed: Double
        var outcome: Outcome
    }

    /// A read made on another node with `atLeastRev` set to an acknowledged write's revision.
    struct Read: Sendable {
        enum Result: Sendable, Equatable {
            /// A list's `count` first elements (as `prefixHash` hashes them), and whether the expected value
            /// was among them.
            case list(count: Int, hash: UInt64, sawExpected: Bool)
            /// A register's value (nil: null).
            case register(String?)
            /// No answer (`unavailable`, a timeout, a lost connection): nothing to check.
            case failed(String)
        }

        var node: Int
        var object: String
        /// The acknowledged write's value, which the read must see (or, for a register, a later one).
        var expectedValue: String
        /// That write's revision, sent as `atLeastRev`.
        var atLeastRev: Int64
        /// The reply's `rev`: the revision of the state read.
        var rev: Int64
        var result: Result
    }

    enum ObserverEvent: Sendable, Equatable {
        /// An insertion (kind 2): `values` at `index` of `object`'s list, at `rev`.
        case insert(rev: Int64, object: String, index: Int, values: [String])
        /// A `resync`: `object`'s whole list as of `rev`.
        case resync(rev: Int64, object: String, values: [String])
        /// The observer reconnected and observed again with `sinceRev`.
        case resumed(sinceRev: Int64)
        /// An event of any other shape, as received.
        case unexpected(String)
    }

    /// One observer's events (a pattern observation of every list, on one node), in arrival order.
    struct ObserverLog: Sendable {
        var node: Int
        var events: [ObserverEvent]
    }

    /// What node `node` held at the end, once every node had applied the whole stream.
    struct FinalState: Sendable {
        var node: Int
        /// Every list object's `items`.
        var lists: [String: [String]]
        /// Every register object's `v`; a register whose value is null is absent.
        var registers: [String: String]
        var digest: String
        var rev: Int64
    }

    /// Every write, each client's in the order it made them.
    var operations: [Operation]
    var reads: [Read] = []
    var observers: [ObserverLog] = []
    var finals: [FinalState]
    /// What went wrong outside the protocol, as the fault schedule saw it (a node that exited by itself).
    var incidents: [String] = []

    /// FNV-1a (64 bits) of `values`, each followed by a newline: what a list read records of the elements
    /// it got, so that the checker can compare it with the final list's prefix without keeping every read.
    static func prefixHash<S: Sequence<String>>(_ values: S) -> UInt64 {
        var hash = PrefixHasher()
        for value in values { hash.add(value) }
        return hash.value
    }

    /// `prefixHash`, one value at a time.
    struct PrefixHasher {
        private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325

        mutating func add(_ element: String) {
            for byte in element.utf8 { mix(byte) }
            mix(0x0A)
        }

        private mutating func mix(_ byte: UInt8) {
            value ^= UInt64(byte)
            value = value &* 0x0000_0100_0000_01B3
        }
    }
}

/// Checks a `ListAppendHistory`: a pure function of it, so that it is tested with hand-made histories
/// (ListAppendCheckerTests) and proven able to find each anomaly it looks for.
///
/// - every acknowledged append is in its list exactly once on every node; no value there that was not
///   sent to that list; none that was refused (an error reply other than `unavailable`) or said not made;
///   an indeterminate append at most once;
/// - each client's acknowledged appends in the order it made them; a list's acknowledged values in
///   revision order; one revision never acknowledged to two writes; real-time order: a write acknowledged
///   before another was sent has the lower revision;
/// - the nodes' lists, registers, revisions and digests are equal; a register ends with its latest
///   acknowledged value or with a value whose write is indeterminate;
/// - a read with `atLeastRev` sees the write it waited for; a list read is a prefix of the final list
///   that holds exactly the acknowledged appends up to the read's revision; a register read is not older
///   than an acknowledged write at or below its revision;
/// - each observer's insertions come in revision order with no gap or repeat (each at the index its list
///   has reached), a `resync` never goes back, what it rebuilt equals the final lists, the revisions it
///   heard are those the writes were acknowledged with, and observers on different nodes heard the same
///   value at every revision;
/// - an incident (a node that exited by itself) is an anomaly too.
enum ListAppendChecker {
    enum AnomalyKind: String, CaseIterable, Sendable {
        case lostAppend
        case duplicateValue
        case unattemptedValue
        case failedWriteApplied
        case notMadeWriteApplied
        case clientOrder
        case listRevisionOrder
        case duplicateRevision
        case realTimeOrder
        case divergence
        case registerFinal
        case readYourWrites
        case readNotPrefix
        case readRevision
        case staleRegisterRead
        case observerOrder
        case observerGap
        case observerFinal
        case observerRevision
        case observerDisagreement
        case observerEvent
        case incident
    }

    struct Anomaly: Sendable, CustomStringConvertible {
        var kind: AnomalyKind
        var message: String
        var description: String { "\(kind.rawValue): \(message)" }
    }

    /// Counts for the run's summary.
    struct Statistics: Sendable {
        var operations = 0
        var appends = 0
        var sets = 0
        var acknowledged = 0
        var failed = 0
        var indeterminate = 0
        /// Indeterminate writes whose reply said they were not made.
        var notMade = 0
        /// Indeterminate writes found applied in the final state (the rest were not).
        var indeterminateApplied = 0
        var reads = 0
        var readsFailed = 0
        var observerEvents = 0
        var observerResumes = 0
        var observerResyncs = 0
    }

    struct Report: Sendable {
        var anomalies: [Anomaly]
        var statistics: Statistics

        /// How many of each kind, and the first `examples` of each.
        func summary(examples: Int = 5) -> String {
            guard !anomalies.isEmpty else { return "no anomalies" }
            var lines: [String] = []
            for kind in AnomalyKind.allCases {
                let ofKind = anomalies.filter { $0.kind == kind }
                guard !ofKind.isEmpty else { continue }
                lines.append("\(kind.rawValue) x\(ofKind.count)")
                for anomaly in ofKind.prefix(examples) { lines.append("  \(anomaly.message)") }
            }
            return lines.joined(separator: "\n")
        }

        func count(_ kind: AnomalyKind) -> Int { anomalies.count { $0.kind == kind } }
    }

    static func check(_ history: ListAppendHistory) -> Report {
        var context = Context(history)
        context.checkOperations()
        context.checkFinals()
        context.checkReads()
        context.checkObservers()
        for incident in history.incidents { context.report(.incident, incident) }
        return Report(anomalies: context.anomalies, statistics: context.statistics)
    }

    /// The indexes the checks share, and what they found.
    private struct Context {
        let history: ListAppendHistory
        /// Each value's write (values are unique; a value sent twice keeps its first write).
        var writes: [String: ListAppendHistory.Operation] = [:]
        /// Each value's write's place in `history.operations` (a client's writes are there in the order it made them).
        var positions: [String: Int] = [:]
        /// Acknowledged writes by object, in revision order.
        var acknowledgedByObject: [String: [(value: String, rev: Int64)]] = [:]
        var anomalies: [Anomaly] = []
        var statistics = Statistics()

        init(_ history: ListAppendHistory) {
            self.history = history
            for (position, operation) in history.operations.enumerated() where writes[operation.value] == nil {
                writes[operation.value] = operation
                positions[operation.value] = position
                if case let .ok(rev) = operation.outcome {
                    acknowledgedByObject[operation.object, default: []].append((operation.value, rev))
                }
            }
            for object in acknowledgedByObject.keys { acknowledgedByObject[object]!.sort { $0.rev < $1.rev } }
        }

        mutating func report(_ kind: AnomalyKind, _ message: String) {
            anomalies.append(Anomaly(kind: kind, message: message))
        }

        func acknowledgedRevision(_ value: String) -> Int64? {
            if case let .ok(rev)? = writes[value]?.outcome { return rev }
            return nil
        }

        static func nodeName(_ index: Int) -> String { "n\(index + 1)" }

        // MARK: Operations alone

        mutating func checkOperations() {
            var acknowledged: [ListAppendHistory.Operation] = []
            for operation in history.operations {
                statistics.operations += 1
                if operation.kind == .append { statistics.appends += 1 } else { statistics.sets += 1 }
                switch operation.outcome {
                case .ok:
                    statistics.acknowledged += 1
                    acknowledged.append(operation)
                case .failed: statistics.failed += 1
                case let .indeterminate(_, notMade):
                    statistics.indeterminate += 1
                    if notMade { statistics.notMade += 1 }
                }
            }
            func rev(_ operation: ListAppendHistory.Operation) -> Int64 {
                if case let .ok(rev) = operation.outcome { return rev }
                return -1
            }
            // One revision, one write.
            let byRevision = Dictionary(grouping: acknowledged, by: rev)
            for (revision, sharing) in byRevision.sorted(by: { $0.key < $1.key }) where sharing.count > 1 {
                report(.duplicateRevision, "revision \(revision) acknowledged to \(sharing.count) writes: "
                    + sharing.map { "\($0.value) (\($0.kind.rawValue) \($0.object) on \(Context.nodeName($0.node)))" }.joined(separator: ", "))
            }
            // Real-time order: going down the revisions, the earliest acknowledgement among the higher
            // revisions must not come before this write was sent.
            var earliestHigher: ListAppendHistory.Operation?
            var index = 0
            let descending = acknowledged.sorted { rev($0) > rev($1) }
            while index < descending.count {
                // Writes sharing a revision are compared with the higher ones only.
                var end = index
                while end < descending.count, rev(descending[end]) == rev(descending[index]) { end += 1 }
                for operation in descending[index..<end] {
                    if let earlier = earliestHigher, earlier.completed < operation.invoked {
                        report(.realTimeOrder, "\(earlier.value) was acknowledged with rev \(rev(earlier)) at t=\(ListAppendChecker.seconds(earlier.completed)), "
                            + "before \(operation.value) was sent (t=\(ListAppendChecker.seconds(operation.invoked))), which got the lower rev \(rev(operation))")
                    }
                }
                for operation in descending[index..<end] where earliestHigher.map({ operation.completed < $0.completed }) ?? true {
                    earliestHigher = operation
                }
                index = end
            }
        }

        // MARK: Final states

        mutating func checkFinals() {
            guard let reference = history.finals.first else {
                report(.divergence, "no node's final state was read")
                return
            }
            for final in history.finals {
                checkLists(of: final)
                checkRegisters(of: final)
                if final.node != reference.node { compare(final, with: reference) }
            }
            // Indeterminate writes found applied (on the first node).
            var present = Set<String>()
            for list in reference.lists.values { present.formUnion(list) }
            present.formUnion(reference.registers.values)
            for operation in history.operations {
                if case .indeterminate = operation.outcome, present.contains(operation.value) { statistics.indeterminateApplied += 1 }
            }
        }

        private mutating func checkLists(of final: ListAppendHistory.FinalState) {
            let node = Context.nodeName(final.node)
            var seen: [String: [String]] = [:]
            for (object, list) in final.lists.sorted(by: { $0.key < $1.key }) {
                for value in list { seen[value, default: []].append(object) }
                var lastMadeByClient: [Int: ListAppendHistory.Operation] = [:]
                var clientsReported = Set<Int>()
                var lastAcknowledged: (value: String, rev: Int64)?
                var revisionOrderReported = false
                for (position, value) in list.enumerated() {
                    guard let write = writes[value], write.kind == .append, write.object == object else {
                        let elsewhere = writes[value].map { " (it was a \($0.kind.rawValue) to \($0.object))" } ?? ""
                        report(.unattemptedValue, "\(node): \(object)[\(position)] is \(value), never appended to \(object)\(elsewhere)")
                        continue
                    }
                    switch write.outcome {
                    case let .failed(code):
                        report(.failedWriteApplied, "\(node): \(object)[\(position)] is \(value), whose append was refused (\(code))")
                    case .indeterminate(_, true):
                        report(.notMadeWriteApplied, "\(node): \(object)[\(position)] is \(value), whose append was answered 'the write was not made'")
                    case .indeterminate: break
                    case let .ok(rev):
                        if let previous = lastMadeByClient[write.client], positions[previous.value]! > positions[value]!,
                           !clientsReported.contains(write.client) {
                            clientsReported.insert(write.client)
                            report(.clientOrder, "\(node): in \(object) client \(write.client)'s \(value) (sent at t=\(ListAppendChecker.seconds(write.invoked))) comes after its \(previous.value) (sent later, t=\(ListAppendChecker.seconds(previous.invoked)))")
                        }
                        lastMadeByClient[write.client] = write
                        if let last = lastAcknowledged, last.rev > rev, !revisionOrderReported {
                            revisionOrderReported = true
                            report(.listRevisionOrder, "\(node): in \(object) \(value) (rev \(rev)) comes after \(last.value) (rev \(last.rev))")
                        }
                        lastAcknowledged = (value, rev)
                    }
                }
            }
            for (value, objects) in seen.sorted(by: { $0.key < $1.key }) where objects.count > 1 {
                report(.duplicateValue, "\(node): \(value) appears \(objects.count) times (in \(objects.joined(separator: ", ")))")
            }
            for (object, acknowledged) in acknowledgedByObject.sorted(by: { $0.key < $1.key }) {
                guard writes[acknowledged[0].value]?.kind == .append else { continue }
                let list = final.lists[object] ?? []
                let present = Set(list)
                let missing = acknowledged.filter { !present.contains($0.value) }
                guard !missing.isEmpty else { continue }
                report(.lostAppend, "\(node): \(missing.count) acknowledged appends missing from \(object) (length \(list.count)): "
                    + missing.prefix(5).map { "\($0.value) (rev \($0.rev))" }.joined(separator: ", "))
            }
        }

        private mutating func checkRegisters(of final: ListAppendHistory.FinalState) {
            let node = Context.nodeName(final.node)
            var objects = Set(final.registers.keys)
            for operation in history.operations where operation.kind == .set { objects.insert(operation.object) }
            for object in objects.sorted() {
                let latest = acknowledgedByObject[object]?.last
                guard let value = final.registers[object] else {
                    if let latest { report(.registerFinal, "\(node): \(object) is null, though \(latest.value) was acknowledged (rev \(latest.rev))") }
                    continue
                }
                guard let write = writes[value], write.kind == .set, write.object == object else {
                    report(.unattemptedValue, "\(node): register \(object) is \(value), never set there")
                    continue
                }
                switch write.outcome {
                case let .failed(code):
                    report(.failedWriteApplied, "\(node): register \(object) is \(value), whose set was refused (\(code))")
                case .indeterminate(_, true):
                    report(.notMadeWriteApplied, "\(node): register \(object) is \(value), whose set was answered 'the write was not made'")
                case .indeterminate: break
                case let .ok(rev):
                    if let latest, latest.rev > rev {
                        report(.registerFinal, "\(node): register \(object) is \(value) (rev \(rev)), not the later acknowledged \(latest.value) (rev \(latest.rev))")
                    }
                }
            }
        }

        private mutating func compare(_ final: ListAppendHistory.FinalState, with reference: ListAppendHistory.FinalState) {
            let (node, other) = (Context.nodeName(final.node), Context.nodeName(reference.node))
            if final.digest != reference.digest || final.rev != reference.rev {
                report(.divergence, "\(node) has digest \(final.digest.prefix(12)) at rev \(final.rev), \(other) \(reference.digest.prefix(12)) at rev \(reference.rev)")
            }
            for object in Set(final.lists.keys).union(reference.lists.keys).sorted() {
                let (mine, theirs) = (final.lists[object] ?? [], reference.lists[object] ?? [])
                guard mine != theirs else { continue }
                let first = ListAppendChecker.firstDifference(mine, theirs)
                report(.divergence, "\(object): \(node) has \(mine.count) elements, \(other) \(theirs.count); first difference at index \(first): "
                    + "\(mine.dropFirst(first).first ?? "end") vs \(theirs.dropFirst(first).first ?? "end")")
            }
            for object in Set(final.registers.keys).union(reference.registers.keys).sorted()
            where final.registers[object] != reference.registers[object] {
                report(.divergence, "register \(object): \(node) has \(final.registers[object] ?? "null"), \(other) \(reference.registers[object] ?? "null")")
            }
        }

        // MARK: Reads

        mutating func checkReads() {
            let reference = history.finals.first
            var bounds: [String: (hashes: [UInt64], highestWithin: [Int64], lowestAfter: [Int64])] = [:]
            for read in history.reads {
                statistics.reads += 1
                let node = Context.nodeName(read.node)
                let what = "read of \(read.object) on \(node) with atLeastRev \(read.atLeastRev) (for \(read.expectedValue)), answered at rev \(read.rev)"
                switch read.result {
                case let .failed(reason):
                    _ = reason
                    statistics.readsFailed += 1
                case let .list(count, hash, sawExpected):
                    if !sawExpected { report(.readYourWrites, "\(what) did not see \(read.expectedValue)") }
                    guard let final = reference?.lists[read.object] else { continue }
                    if bounds[read.object] == nil { bounds[read.object] = listBounds(final) }
                    let bound = bounds[read.object]!
                    guard count <= final.count, bound.hashes[count] == hash else {
                        report(.readNotPrefix, "\(what) got \(count) elements that are not the first \(count) of the final \(final.count)")
                        continue
                    }
                    if bound.highestWithin[count] > read.rev {
                        report(.readRevision, "\(what) holds a write acknowledged with the later rev \(bound.highestWithin[count])")
                    }
                    if bound.lowestAfter[count] <= read.rev {
                        report(.readRevision, "\(what) lacks a write acknowledged with rev \(bound.lowestAfter[count])")
                    }
                case let .register(value):
                    guard let value else {
                        report(.readYourWrites, "\(what) got null")
                        continue
                    }
                    guard let write = writes[value], write.kind == .set, write.object == read.object else {
                        report(.unattemptedValue, "\(what) got \(value), never set there")
                        continue
                    }
                    switch write.outcome {
                    case let .failed(code): report(.failedWriteApplied, "\(what) got \(value), whose set was refused (\(code))")
                    case .indeterminate(_, true): report(.notMadeWriteApplied, "\(what) got \(value), whose set was answered 'the write was not made'")
                    case .indeterminate: break
                    case let .ok(rev):
                        if rev > read.rev {
                            report(.readRevision, "\(what) got \(value), acknowledged with the later rev \(rev)")
                        } else if let newer = acknowledgedByObject[read.object]?.last(where: { $0.rev > rev && $0.rev <= read.rev }) {
                            let kind: AnomalyKind = newer.value == read.expectedValue ? .readYourWrites : .staleRegisterRead
                            report(kind, "\(what) got \(value) (rev \(rev)), older than \(newer.value) (rev \(newer.rev))")
                        }
                    }
                }
            }
        }

        /// For each prefix length of `list`: its hash, the highest acknowledged revision in it, and the
        /// lowest acknowledged revision after it (Int64.min and .max when there is none).
        private func listBounds(_ list: [String]) -> (hashes: [UInt64], highestWithin: [Int64], lowestAfter: [Int64]) {
            var hashes: [UInt64] = []
            var hasher = ListAppendHistory.PrefixHasher()
            hashes.append(hasher.value)
            var highest: [Int64] = [Int64.min]
            for value in list {
                hasher.add(value)
                hashes.append(hasher.value)
                highest.append(max(highest.last!, acknowledgedRevision(value) ?? Int64.min))
            }
            var lowest = [Int64](repeating: Int64.max, count: list.count + 1)
            for index in stride(from: list.count - 1, through: 0, by: -1) {
                lowest[index] = min(lowest[index + 1], acknowledgedRevision(list[index]) ?? Int64.max)
            }
            return (hashes, highest, lowest)
        }

        // MARK: Observers

        mutating func checkObservers() {
            let finalLists = history.finals.first?.lists ?? [:]
            /// What the observers heard at each revision and when each value, and which observer first.
            var heard: [Int64: (object: String, values: [String], observer: Int)] = [:]
            var heardAt: [String: (rev: Int64, observer: Int)] = [:]
            var disagreements = 0
            for (number, log) in history.observers.enumerated() {
                let name = "observer \(number) on \(Context.nodeName(log.node))"
                var lists: [String: [String]] = [:]
                var lastRev = Int64.min
                var orderReports = 0
                var gapReports = 0
                for event in log.events {
                    switch event {
                    case let .resumed(sinceRev):
                        _ = sinceRev
                        statistics.observerResumes += 1
                    case let .unexpected(text):
                        report(.observerEvent, "\(name): unexpected event \(text.prefix(300))")
                    case let .resync(rev, object, values):
                        statistics.observerEvents += 1
                        statistics.observerResyncs += 1
                        if rev < lastRev, orderReports < 5 {
                            orderReports += 1
                            report(.observerOrder, "\(name): resync of \(object) at rev \(rev) after an event at rev \(lastRev)")
                        }
                        let current = lists[object] ?? []
                        if current.count > values.count || Array(values.prefix(current.count)) != current, gapReports < 5 {
                            gapReports += 1
                            report(.observerGap, "\(name): resync of \(object) at rev \(rev) to \(values.count) elements does not extend the \(current.count) heard so far")
                        }
                        lists[object] = values
                        lastRev = max(lastRev, rev)
                    case let .insert(rev, object, index, values):
                        statistics.observerEvents += 1
                        if rev <= lastRev, orderReports < 5 {
                            orderReports += 1
                            report(.observerOrder, "\(name): insertion into \(object) at rev \(rev) after an event at rev \(lastRev)")
                        }
                        var list = lists[object] ?? []
                        if index != list.count, gapReports < 5 {
                            gapReports += 1
                            let what = index > list.count ? "\(index - list.count) missed" : "\(list.count - index) repeated"
                            report(.observerGap, "\(name): insertion of \(values.first ?? "?") at \(object)[\(index)] (rev \(rev)) after \(list.count) elements: \(what)")
                        }
                        if index < list.count { list.removeSubrange(index...) }
                        list += values
                        lists[object] = list
                        for value in values {
                            if let acknowledged = acknowledgedRevision(value), acknowledged != rev {
                                report(.observerRevision, "\(name) heard \(value) at rev \(rev); it was acknowledged with rev \(acknowledged)")
                            }
                            if let first = heardAt[value] {
                                if first.rev != rev, disagreements < 20 {
                                    disagreements += 1
                                    report(.observerDisagreement, "observer \(first.observer) heard \(value) at rev \(first.rev), \(name) at rev \(rev)")
                                }
                            } else {
                                heardAt[value] = (rev, number)
                            }
                        }
                        if let first = heard[rev] {
                            if (first.object, first.values) != (object, values), disagreements < 20 {
                                disagreements += 1
                                report(.observerDisagreement, "rev \(rev): observer \(first.observer) heard \(first.values) in \(first.object), \(name) \(values) in \(object)")
                            }
                        } else {
                            heard[rev] = (object, values, number)
                        }
                        lastRev = max(lastRev, rev)
                    }
                }
                for object in Set(lists.keys).union(finalLists.keys).sorted() {
                    let (mine, final) = (lists[object] ?? [], finalLists[object] ?? [])
                    guard mine != final else { continue }
                    let first = ListAppendChecker.firstDifference(mine, final)
                    report(.observerFinal, "\(name) rebuilt \(object) with \(mine.count) elements, the final list has \(final.count); first difference at index \(first)")
                }
            }
        }
    }

    /// The first index where `a` and `b` differ (the shorter one's length when one is a prefix of the other).
    private static func firstDifference(_ a: [String], _ b: [String]) -> Int {
        var index = 0
        while index < a.count, index < b.count, a[index] == b[index] { index += 1 }
        return index
    }

    private static func seconds(_ time: Double) -> String {
        let milliseconds = Int((time * 1000).rounded())
        return "\(milliseconds / 1000).\(String(milliseconds % 1000).leftPadded(3))"
    }
}

private extension String {
    func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
