import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// Live queries in the engine (pattern observations with `where`): `entered`, changes while in the set,
/// `left` (also on delete), `initial`, permissions on what the filter reads, and incremental evaluation,
/// checked against a brute-force reference over random objects, writes and batches.
@Suite struct LiveQueryTests {
    private let me = ConnectionID(7)

    private func observe(_ engine: KVOEngine, _ pattern: String, _ keyPath: String? = nil, where filter: String,
                         _ options: ObservationOptions = [.new, .old], sinceRev: UInt64? = nil,
                         access: ConnectionAccess? = nil) throws -> (SubscriptionID, [ChangeNotification]) {
        var notifications: [ChangeNotification] = []
        let sub = try engine.observe(pattern: try ObjectIDPattern(pattern), keyPath: keyPath.map { try! KeyPath($0) },
                                     filter: try LiveQuery.compile(filter), options: options, connection: me,
                                     sinceRev: sinceRev, access: access, notifications: &notifications)
        return (sub, notifications)
    }

    /// Events for `sub` only, as "reason object old new" lines.
    private func lines(_ notifications: [ChangeNotification], for sub: SubscriptionID) -> [String] {
        notifications.filter { $0.recipients.contains { $0.subscription == sub } }.map {
            "\($0.reason) \($0.object) \($0.old) \($0.new)"
        }
    }

    @Test func objectsEnterChangeInAndLeaveTheSet() throws {
        let engine = KVOEngine()
        try engine.create("order:1", ["status": "open", "total": 150])
        try engine.create("order:2", ["status": "open", "total": 50])
        let (ids, initialIDs) = try observe(engine, "order:*", where: "status == 'open' && total > 100", [.initial])
        let (totals, initialTotals) = try observe(engine, "order:*", "total", where: "status == 'open' && total > 100",
                                                  [.initial, .new, .old])
        expectEqual(initialIDs.map(\.new), [["order:1"]])
        expectEqual(lines(initialTotals, for: totals), ["initial order:1 null 150"])
        var heard = try engine.set("order:2", "total", 120)      // enters
        heard += try engine.set("order:1", "total", 160)         // changes inside
        heard += try engine.set("order:1", "note", "unrelated")  // nothing
        heard += try engine.set("order:1", "status", "closed")   // leaves
        heard += try engine.create("order:3", ["status": "open", "total": 101])  // created inside: enters
        heard += try engine.create("order:4", ["status": "open", "total": 1])    // created outside: nothing
        heard += try engine.delete("order:2")                     // deleted inside: leaves
        heard += try engine.delete("order:4")                     // deleted outside: nothing
        #expect(lines(heard, for: ids) == [
            "entered order:2 null null", "left order:1 null null", "entered order:3 null null", "left order:2 null null",
        ])
        #expect(lines(heard, for: totals) == [
            "entered order:2 null 120", "valueChanged order:1 150 160", "left order:1 160 null",
            "entered order:3 null 101", "left order:2 120 null",
        ])
        #expect(heard.allSatisfy { $0.rev > 0 && $0.namesObject })
    }

    @Test func aBatchMovesObjectsInAndOutAtItsOneRevision() throws {
        let engine = KVOEngine()
        try engine.create("task:1", ["done": false])
        try engine.create("task:2", ["done": true])
        let (sub, _) = try observe(engine, "task:*", "done", where: "done == false")
        try engine.beginBatch()
        try engine.set("task:1", "done", true)
        try engine.set("task:2", "done", false)
        try engine.set("task:1", "done", false)  // back: task:1 never left, and its value did not change
        var notifications: [ChangeNotification] = []
        let rev = engine.commitBatch(notifications: &notifications)
        expectEqual(lines(notifications, for: sub), ["entered task:2 null false"])
        #expect(notifications.allSatisfy { $0.rev == rev })
    }

    @Test func theFilterReadsAsTheObserverMayRead() throws {
        let engine = KVOEngine()
        try engine.create("secret", ["level": 9])
        try engine.create("doc:1", ["meta": .reference(to: "secret"), "title": "a"])
        let reader = ConnectionAccess(Principal(user: "reader", policy: AccessPolicy(rules: [try AccessRule(argument: "doc:*=read")])))
        let (blind, initialBlind) = try observe(engine, "doc:*", "title", where: "meta.level > 5", [.initial, .new],
                                                access: reader)
        let (open, initialOpen) = try observe(engine, "doc:*", "title", where: "meta.level > 5", [.initial, .new])
        #expect(initialBlind.isEmpty, "the secret's level reads as null to the reader: doc:1 is not in its set")
        expectEqual(lines(initialOpen, for: open), ["initial doc:1 null \"a\""])
        let heard = try engine.set("doc:1", "title", "b")
        #expect(lines(heard, for: blind).isEmpty)
        expectEqual(lines(heard, for: open), ["valueChanged doc:1 \"a\" \"b\""])
        // An `equals` on a value the reader may not see never admits the object either.
        let (indexed, initialIndexed) = try observe(engine, "doc:*", where: "meta.kind == 'x'", [.initial], access: reader)
        let more = try engine.set("secret", "kind", "x") + engine.set("doc:1", "title", "c")
        expectEqual(initialIndexed.map(\.new), [[]])
        #expect(lines(more, for: indexed).isEmpty)
    }

    @Test func tenThousandQueriesOfWhichOneMatchesCostAWriteAFewEvaluations() throws {
        let engine = KVOEngine()
        for index in 0..<100 { try engine.create("order:\(index)", ["owner": .string("u\(index)"), "total": 0]) }
        var subs: [SubscriptionID] = []
        for user in 0..<10_000 {
            subs.append(try observe(engine, "order:*", where: "owner == 'u\(user)' && total >= 0").0)
        }
        let start = engine.liveQueryEvaluations
        var heard: [ChangeNotification] = []
        for value in 1...100 { heard += try engine.set("order:7", "total", .int(Int64(value))) }
        expectEqual(engine.liveQueryEvaluations - start, 100 * 2, "one query, evaluated before and after each write")
        #expect(heard.isEmpty, "order:7 stayed in u7's set")
        let moved = engine.liveQueryEvaluations
        heard = try engine.set("order:7", "owner", "u9000")
        expectEqual(engine.liveQueryEvaluations - moved, 3, "u7's before and after, u9000's after")
        expectEqual(lines(heard, for: subs[7]), ["left order:7 null null"])
        expectEqual(lines(heard, for: subs[9000]), ["entered order:7 null null"])
        // A write at a key no filter reads evaluates nothing.
        let quiet = engine.liveQueryEvaluations
        try engine.set("order:7", "note", "x")
        expectEqual(engine.liveQueryEvaluations, quiet)
    }

    @Test func resumingReplaysTheSpanOrResyncsPastHistory() throws {
        let engine = KVOEngine(historyLimit: 4)
        try engine.create("o:1", ["n": 1])
        try engine.create("o:2", ["n": 5])
        let (sub, events) = try observe(engine, "o:*", "n", where: "n > 2", sinceRev: 1)
        expectEqual(lines(events, for: sub), ["entered o:2 null 5"], "revision 2, replayed")
        try engine.set("o:1", "n", 3)
        try engine.set("o:2", "n", 0)
        try engine.set("o:1", "n", 4)
        let (resumed, replayed) = try observe(engine, "o:*", "n", where: "n > 2", sinceRev: 2)
        expectEqual(lines(replayed, for: resumed), ["entered o:1 null 3", "left o:2 5 null", "valueChanged o:1 3 4"])
        let (late, resync) = try observe(engine, "o:*", "n", where: "n > 2", sinceRev: 0)
        expectEqual(lines(resync, for: late), ["resync o:1 null 4"], "history (4 revisions) no longer reaches back")
        // A replay whose filter evaluations pass the step budget resyncs instead: one `observe` never holds
        // the loop for long, however far back it reaches and whatever its filter.
        engine.liveQueryReplayStepLimit = 10
        let (costly, fallback) = try observe(engine, "o:*", "n", where: "n > 2 && n * 3 - 1 > 2 * n - 9", sinceRev: 2)
        expectEqual(lines(fallback, for: costly), ["resync o:1 null 4"])
        engine.liveQueryReplayStepLimit = 1_000
        let (cheap, replay) = try observe(engine, "o:*", "n", where: "n > 2 && n * 3 - 1 > 2 * n - 9", sinceRev: 2)
        expectEqual(lines(replay, for: cheap), ["entered o:1 null 3", "left o:2 5 null", "valueChanged o:1 3 4"])
    }

    @Test func unobservingRemovesTheQueryFromItsBucket() throws {
        let engine = KVOEngine()
        try engine.create("o:1", ["owner": "a"])
        let (sub, _) = try observe(engine, "o:*", where: "owner == 'b'")
        let (other, _) = try observe(engine, "o:*", where: "owner == 'c'")
        #expect(engine.unobserve(sub, connection: me))
        #expect(try engine.set("o:1", "owner", "b").isEmpty)
        expectEqual(lines(try engine.set("o:1", "owner", "c"), for: other), ["entered o:1 null null"], "the other bucket stays")
        #expect(engine.unobserve(other, connection: me))
        #expect(engine.registry.patterns.equalityKeyPaths.isEmpty)
        #expect(try engine.set("o:1", "owner", "b").isEmpty)
        expectEqual(engine.patternObservationCount, 0)
    }

    // MARK: - The reference

    /// A query of the reference test: its pattern, key path and filter text, and the same filter as a
    /// Swift function of the object's values (the brute-force side).
    private struct Query: Sendable {
        let pattern: String
        let keyPath: String?
        let filter: String
        let holds: @Sendable ([String: JSONValue]) -> Bool
    }

    /// Everything an event says, for comparing replayed events with live ones.
    private static func summary(_ event: ChangeNotification) -> String {
        "\(event.rev) \(event.reason) \(event.object) \(event.keyPath) \(event.kind) prior=\(event.isPrior) "
            + "\(event.indexes ?? []) old=\(event.old) new=\(event.new) values=\(event.carriesValues)"
            + (event.expired ? " expired" : "")
    }

    private static func int(_ value: JSONValue?) -> Int64? {
        if case let .int(number)? = value { return number }
        return nil
    }

    private static let queries: [Query] = [
        Query(pattern: "o:*", keyPath: nil, filter: "status == 'open' && total > 100") {
            $0["status"] == "open" && (int($0["total"]) ?? 0) > 100
        },
        Query(pattern: "o:*", keyPath: "total", filter: "owner == 'bob'") { $0["owner"] == "bob" },
        Query(pattern: "*", keyPath: nil, filter: "total >= 50 || status == 'held'") {
            (int($0["total"]).map { $0 >= 50 } ?? false) || $0["status"] == "held"
        },
        Query(pattern: "o:*", keyPath: "status", filter: "total % 2 == 0") { int($0["total"]).map { $0 % 2 == 0 } ?? false },
        Query(pattern: "o:*", keyPath: "owner", filter: "'ada' == owner && status != 'closed'") {
            $0["owner"] == "ada" && $0["status"] != "closed"
        },
    ]

    @Test(arguments: [1, 2, 3] as [UInt64])
    func randomWritesGiveTheEventsOfABruteForceReference(seed: UInt64) throws {
        var random = SplitMix64(state: seed)
        let engine = KVOEngine()
        let ids = (0..<8).map { "o:\($0)" } + ["x:1", "x:2"]
        var store: [String: [String: JSONValue]] = [:]
        func randomValues() -> [String: JSONValue] {
            ["status": .string(["open", "closed", "held"][Int(random.next() % 3)]),
             "total": .int(Int64(random.next() % 200)), "owner": .string(["ada", "bob", "cy"][Int(random.next() % 3)])]
        }
        var subs: [SubscriptionID] = []
        var live = Array(repeating: [String](), count: Self.queries.count)
        for query in Self.queries {
            subs.append(try observe(engine, query.pattern, query.keyPath, where: query.filter).0)
        }
        /// Whether `id` is in query `q`'s set, and its value at the key path, in the reference's store.
        func reference(_ q: Int, _ id: String) -> (member: Bool, value: JSONValue) {
            let query = Self.queries[q]
            guard let values = store[id], (try! ObjectIDPattern(query.pattern)).matches(id), query.holds(values) else {
                return (false, .null)
            }
            return (true, query.keyPath.map { values[$0] ?? .null } ?? .null)
        }
        for step in 0..<400 {
            let touched: [String]
            let before = Dictionary(uniqueKeysWithValues: Self.queries.indices.flatMap { q in ids.map { ("\(q) \($0)", reference(q, $0)) } })
            var heard: [ChangeNotification] = []
            let inBatch = random.next() % 5 == 0
            if inBatch { try engine.beginBatch() }
            var parts: [String] = []
            for _ in 0..<(inBatch ? 1 + Int(random.next() % 3) : 1) {
                let id = ids[Int(random.next() % UInt64(ids.count))]
                parts.append(id)
                if store[id] == nil {
                    let values = randomValues()
                    heard += try engine.create(id, values)
                    store[id] = values
                } else if random.next() % 8 == 0 {
                    if !inBatch, random.next() % 2 == 0 {
                        // Its time to live ends: a deletion whose `left` says `expired`.
                        try engine.setTTL(id, milliseconds: 1)
                        engine.writeTime += 1_000
                        _ = try engine.expire(id, ifRev: engine.revision, notifications: &heard)
                    } else {
                        heard += try engine.delete(id)
                    }
                    store[id] = nil
                } else {
                    let key = ["status", "total", "owner", "note"][Int(random.next() % 4)]
                    let value: JSONValue = key == "total" ? .int(Int64(random.next() % 200))
                        : .string(["open", "closed", "held", "ada", "bob", "cy"][Int(random.next() % 6)])
                    heard += try engine.set(id, key, value)
                    store[id]![key] = value
                }
            }
            if inBatch {
                #expect(heard.isEmpty)
                engine.commitBatch(notifications: &heard)
            }
            touched = Array(Set(parts))
            for (q, sub) in subs.enumerated() {
                live[q] += heard.filter { $0.recipients.contains { $0.subscription == sub } }.map(Self.summary)
                var expected: [String] = []
                for id in touched {
                    let was = before["\(q) \(id)"]!
                    let now = reference(q, id)
                    switch (was.member, now.member) {
                    case (false, true): expected.append("entered \(id) null \(now.value)")
                    case (true, false): expected.append("left \(id) \(was.value) null")
                    case (true, true) where was.value != now.value: expected.append("valueChanged \(id) \(was.value) \(now.value)")
                    default: break
                    }
                }
                expectEqual(lines(heard, for: sub).sorted(), expected.sorted(), "seed \(seed) step \(step) query \(q): \(parts)")
            }
        }
        // Resumed from the start, each query replays exactly what it heard live (`PatternReplay`).
        for (q, query) in Self.queries.enumerated() {
            let (sub, replayed) = try observe(engine, query.pattern, query.keyPath, where: query.filter, sinceRev: 0)
            #expect(replayed.filter { $0.recipients.contains { $0.subscription == sub } }.map(Self.summary) == live[q],
                    "seed \(seed) query \(q)")
        }
        #expect(live.joined().contains { $0.contains(" expired") } && live.joined().contains { $0.contains("entered") })
        // A new observation's `initial` lists exactly the reference's members.
        for (q, query) in Self.queries.enumerated() {
            let (sub, initial) = try observe(engine, query.pattern, query.keyPath, where: query.filter, [.initial, .new])
            if query.keyPath == nil {
                let members = ids.filter { reference(q, $0).member }.sorted()
                expectEqual(initial.map(\.new), [.array(members.map(JSONValue.string))], "query \(q)")
            } else {
                let members = ids.filter { reference(q, $0).member }.sorted().map { "initial \($0) null \(reference(q, $0).value)" }
                expectEqual(lines(initial, for: sub), members, "query \(q)")
            }
        }
    }
}
