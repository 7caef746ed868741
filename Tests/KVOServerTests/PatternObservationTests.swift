import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// Pattern (object-set) observations in the engine: id sets and key paths on every matching object,
/// initial, resuming, cleanup, permissions and the index's cost.
@Suite struct PatternObservationTests {
    private let me = ConnectionID(7)

    private func observe(_ engine: KVOEngine, _ pattern: String, _ keyPath: String? = nil,
                         _ options: ObservationOptions = [.new, .old], sinceRev: UInt64? = nil,
                         by connection: ConnectionID? = nil, access: ConnectionAccess? = nil)
        throws -> (SubscriptionID, [ChangeNotification]) {
        var notifications: [ChangeNotification] = []
        let sub = try engine.observe(pattern: try ObjectIDPattern(pattern), keyPath: keyPath.map { try! KeyPath($0) },
                                     options: options, connection: connection ?? me, sinceRev: sinceRev,
                                     access: access, notifications: &notifications)
        return (sub, notifications)
    }

    /// Events for `sub` only, as "reason object old new" lines.
    private func lines(_ notifications: [ChangeNotification], for sub: SubscriptionID) -> [String] {
        notifications.filter { $0.recipients.contains { $0.subscription == sub } }.map {
            "\($0.isPrior ? "prior " : "")\($0.reason) \($0.object) \($0.old) \($0.new)"
        }
    }

    @Test func idSetHearsCreationsAndDeletionsOfMatchingIdsOnly() throws {
        let engine = KVOEngine()
        let (sub, _) = try observe(engine, "user:*")
        var heard = try engine.create("user:1", ["n": 1])
        heard += try engine.create("order:1", ["n": 1])
        heard += try engine.create("user", ["n": 1])
        heard += try engine.set("user:1", "n", 2)
        heard += try engine.delete("order:1")
        heard += try engine.delete("user:1")
        expectEqual(lines(heard, for: sub), ["created user:1 null null", "sourceDeleted user:1 null null"])
        #expect(heard.allSatisfy { $0.namesObject && !$0.carriesValues })
        // The subscription goes on after a deletion.
        expectEqual(lines(try engine.create("user:1", [:]), for: sub), ["created user:1 null null"])
    }

    @Test func globsBeyondATrailingStarAndExactIds() throws {
        let engine = KVOEngine()
        let (glob, _) = try observe(engine, "user:*:profile")
        let (exact, _) = try observe(engine, "config")
        var heard = try engine.create("user:1:profile", [:])
        heard += try engine.create("user:1:avatar", [:])
        heard += try engine.create("config", [:])
        heard += try engine.create("configs", [:])
        expectEqual(lines(heard, for: glob), ["created user:1:profile null null"])
        expectEqual(lines(heard, for: exact), ["created config null null"])
    }

    @Test func keyPathOnPresentAndFutureObjects() throws {
        let engine = KVOEngine()
        try engine.create("user:1", ["address": ["city": "London"]])
        let (sub, _) = try observe(engine, "user:*", "address.city", [.new, .old])
        var heard = try engine.set("user:1", "address.city", "Paris")
        heard += try engine.create("user:2", ["address": ["city": "Oslo"]])
        heard += try engine.create("user:3", ["name": "no city"])  // no value: no event
        heard += try engine.set("user:3", "address", ["city": "Rome"])
        heard += try engine.set("user:2", "name", "unrelated")  // the key path is unchanged
        heard += try engine.create("other", ["address": ["city": "Nowhere"]])
        heard += try engine.delete("user:2")
        #expect(lines(heard, for: sub) == [
            "valueChanged user:1 \"London\" \"Paris\"",
            "created user:2 null \"Oslo\"",
            "valueChanged user:3 null \"Rome\"",
            "sourceDeleted user:2 \"Oslo\" null",
        ])
    }

    @Test func arrayChangesKeepTheirKindsAndPriorsComeFirst() throws {
        let engine = KVOEngine()
        try engine.create("list:1", ["items": [1, 2]])
        let (sub, _) = try observe(engine, "list:*", "items", [.new, .old, .prior])
        let heard = try engine.mutate("list:1", "items", .insert(indexes: [2], values: [3]))
        let mine = heard.filter { $0.recipients.contains { $0.subscription == sub } }
        expectEqual(mine.map(\.isPrior), [true, false])
        expectEqual(mine.last?.kind, .insertion)
        expectEqual(mine.last?.indexes, [2])
        expectEqual(mine.last?.new, [3])
    }

    @Test func initialListsMatchingIdsSortedOrOneEventPerObject() throws {
        let engine = KVOEngine()
        for id in ["user:b", "user:a", "order:1", "user", "user:c"] { try engine.create(id, ["v": .string(id)]) }
        let (_, ids) = try observe(engine, "user:*", nil, [.initial])
        expectEqual(ids.count, 1)
        expectEqual(ids.first?.reason, .initial)
        expectEqual(ids.first?.new, ["user:a", "user:b", "user:c"])
        expectEqual(ids.first?.object, "")
        let (_, values) = try observe(engine, "user:*", "v", [.initial, .new])
        expectEqual(values.map(\.object), ["user:a", "user:b", "user:c"])
        expectEqual(values.map(\.new), ["user:a", "user:b", "user:c"])
        let (_, everything) = try observe(engine, "*", nil, [.initial])
        expectEqual(everything.first?.new.arrayValue?.count, 5)
        let (_, none) = try observe(engine, "nothing*", nil, [.initial])
        expectEqual(none.first?.new, [])
    }

    @Test func resumingReplaysMatchingHistoryThenContinuesLive() throws {
        let engine = KVOEngine()
        try engine.create("user:1", ["n": 0])  // rev 1
        let since = engine.revision
        try engine.create("user:2", ["n": 5])  // 2
        try engine.set("user:1", "n", 1)  // 3
        try engine.create("other", ["n": 9])  // 4
        try engine.delete("user:2")  // 5
        let (ids, idEvents) = try observe(engine, "user:*", sinceRev: since)
        expectEqual(lines(idEvents, for: ids), ["created user:2 null null", "sourceDeleted user:2 null null"])
        expectEqual(idEvents.map(\.rev), [2, 5])
        let (values, valueEvents) = try observe(engine, "user:*", "n", [.new, .old], sinceRev: since)
        #expect(lines(valueEvents, for: values) == [
            "created user:2 null 5", "valueChanged user:1 0 1", "sourceDeleted user:2 5 null",
        ])
        expectEqual(valueEvents.map(\.rev), [2, 3, 5])
        let live = try engine.set("user:1", "n", 2)
        expectEqual(lines(live, for: values), ["valueChanged user:1 1 2"])
        expectEqual(live.first { $0.recipients.contains { $0.subscription == values } }?.rev, 6)
    }

    @Test func resumingPastHistoryResyncs() throws {
        let engine = KVOEngine(historyLimit: 2)
        for index in 1...5 { try engine.create("user:\(index)", ["n": .int(Int64(index))]) }
        try engine.delete("user:5")
        let (ids, idEvents) = try observe(engine, "user:*", sinceRev: 1)
        expectEqual(lines(idEvents, for: ids), ["resync  null [\"user:1\",\"user:2\",\"user:3\",\"user:4\"]"])
        let (values, valueEvents) = try observe(engine, "user:*", "n", [.new], sinceRev: 1)
        expectEqual(valueEvents.map(\.reason), [.resync, .resync, .resync, .resync])
        expectEqual(valueEvents.map(\.object), ["user:1", "user:2", "user:3", "user:4"])
        #expect(valueEvents.allSatisfy { $0.rev == engine.revision && $0.recipients.map(\.subscription) == [values] })
    }

    @Test func unobserveAndDisconnectRemoveThemAndTheyCountAgainstTheLimit() throws {
        let engine = KVOEngine()
        engine.maximumObservationsPerConnection = 3
        try engine.create("user:1", [:])
        let (first, _) = try observe(engine, "user:*")
        _ = try observe(engine, "user:1", "n")
        _ = try engine.observe("user:1", "n", by: me)
        expectEqual(engine.observationCount, 3)
        expectEqual(engine.patternObservationCount, 2)
        #expect(throws: KVOError.self) { try observe(engine, "a*") }
        #expect(!engine.unobserve(first, connection: ConnectionID(99)), "another connection's")
        #expect(engine.unobserve(first, connection: me))
        #expect(!engine.unobserve(first, connection: me), "twice is harmless")
        _ = try observe(engine, "b*")
        expectEqual(try engine.observers(of: "user:1").count, 2)
        expectEqual(engine.disconnect(me), 3)
        expectEqual(engine.observationCount, 0)
        expectEqual(engine.patternObservationCount, 0)
        #expect(try engine.create("user:2", [:]).isEmpty, "nothing left to notify")
    }

    @Test func infoListsPatternObserversOfAnObject() throws {
        let engine = KVOEngine()
        try engine.create("user:1", [:])
        let (sub, _) = try observe(engine, "user:*", "a.b")
        _ = try observe(engine, "order:*")
        let observers = try engine.observers(of: "user:1")
        expectEqual(observers.map(\.subscription), [sub])
        expectEqual(observers.first?.pattern, "user:*")
        expectEqual(observers.first?.keyPath, "a.b")
    }

    @Test func deliversOnlyObjectsTheUserMayRead() throws {
        let engine = KVOEngine()
        let policy = AccessPolicy(rules: [try AccessRule(argument: "doc-public-*=read")])
        let access = ConnectionAccess(Principal(user: "reader", policy: policy))
        try engine.create("doc-public-1", ["t": "a"])
        try engine.create("doc-secret-1", ["t": "b"])
        let (ids, initial) = try observe(engine, "doc-*", nil, [.initial], access: access)
        expectEqual(initial.first?.new, ["doc-public-1"])
        let (values, _) = try observe(engine, "doc-*", "t", [.new], access: access)
        var heard = try engine.create("doc-secret-2", ["t": "c"])
        heard += try engine.set("doc-secret-1", "t", "d")
        heard += try engine.create("doc-public-2", ["t": "e"])
        heard += try engine.delete("doc-secret-2")
        expectEqual(lines(heard, for: ids), ["created doc-public-2 null null"])
        expectEqual(lines(heard, for: values), ["created doc-public-2 null \"e\""])
        // Through a reference into an unreadable object: left out too.
        try engine.create("doc-secret-3", ["t": "hidden"])
        let (follow, _) = try observe(engine, "doc-public-*", "link.t", [.new], access: access)
        let linked = try engine.set("doc-public-1", "link", .reference(to: "doc-secret-3"))
        #expect(lines(linked, for: follow).isEmpty)
    }

    @Test func aWriteVisitsOnlyPatternsThatArePrefixesOfItsId() throws {
        let engine = KVOEngine()
        try engine.create("bench", ["v": 0])
        for index in 0..<10_000 { _ = try observe(engine, "other:\(index):*", "v") }
        let index = engine.registry.patterns
        #expect(index.matching("bench").isEmpty)
        expectEqual(index.matching("other:42:x").count, 1)
        #expect(try engine.set("bench", "v", 1).isEmpty)
        let (sub, _) = try observe(engine, "ben*", "v")
        expectEqual(lines(try engine.set("bench", "v", 2), for: sub), ["valueChanged bench 1 2"])
    }

    @Test func manyMatchingPatternsShareOneEventPerKeyPath() throws {
        let engine = KVOEngine()
        try engine.create("hot", ["v": 0])
        for _ in 0..<1_000 { _ = try observe(engine, "h*", "v", [.new]) }
        for _ in 0..<1_000 { _ = try observe(engine, "*") }
        let heard = try engine.set("hot", "v", 1)
        expectEqual(heard.count, 1, "one notification for every pattern of the key path")
        expectEqual(heard.first?.recipients.count, 1_000)
        let deleted = try engine.delete("hot")
        expectEqual(deleted.count, 2)
        expectEqual(deleted.map(\.recipients.count), [1_000, 1_000])
    }

    @Test func theIndexPrunesEmptyNodes() throws {
        let engine = KVOEngine()
        let subs = try (0..<100).map { try observe(engine, "p\($0)x*").0 }
        for sub in subs { #expect(engine.unobserve(sub, connection: me)) }
        expectEqual(engine.registry.patterns.count, 0)
        #expect(engine.registry.patterns.matching("p1x").isEmpty)
    }
}

/// How pattern events are written: the object in every event (compact `"t"`), no key path or value
/// for an id set.
@Suite struct PatternEventEncodingTests {
    private func line(_ notification: ChangeNotification, _ options: ObservationOptions) -> String {
        var encoder = EventEncoder(notification)
        return String(decoding: encoder.line(subscription: 3, options: options), as: UTF8.self)
    }

    private func idSetEvent(_ reason: ChangeReason) -> ChangeNotification {
        var notification = ChangeNotification(object: "user:2", keyPath: "", reason: reason, rev: 9, kind: .setting,
                                              isPrior: false, old: .null, new: .null, recipients: [])
        notification.namesObject = true
        notification.carriesValues = false
        return notification
    }

    @Test func idSetEventsNameTheObjectAndCarryNoValue() {
        #expect(line(idSetEvent(.created), [.new, .old])
            == #"{"event":"change","sub":3,"object":"user:2","reason":"created","rev":9,"change":{"kind":1}}"# + "\n")
        #expect(line(idSetEvent(.sourceDeleted), [.new, .compactEvents])
            == #"{"s":3,"r":9,"t":"user:2","w":"s"}"# + "\n")
    }

    @Test func idSetInitialListsTheIdsWithoutAnObject() {
        var notification = ChangeNotification(object: "", keyPath: "", reason: .initial, rev: 4, kind: .setting,
                                              isPrior: false, old: .null, new: ["a", "b"], recipients: [])
        notification.namesObject = true
        #expect(line(notification, [.new])
            == #"{"event":"change","sub":3,"reason":"initial","rev":4,"change":{"kind":1,"new":["a","b"]}}"# + "\n")
        expectEqual(line(notification, [.new, .compactEvents]), #"{"s":3,"r":4,"w":"i","n":["a","b"]}"# + "\n")
    }

    @Test func keyPathEventsAreOrdinaryChangesNamingTheirObject() {
        var notification = ChangeNotification(object: "user:1", keyPath: "address.city", reason: .valueChanged, rev: 5,
                                              kind: .setting, isPrior: false, old: "London", new: "Paris", recipients: [])
        #expect(line(notification, [.new, .compactEvents]) == #"{"s":3,"r":5,"n":"Paris"}"# + "\n",
                "an ordinary observation's compact event leaves the object out")
        notification.namesObject = true
        expectEqual(line(notification, [.new, .compactEvents]), #"{"s":3,"r":5,"t":"user:1","n":"Paris"}"# + "\n")
        expectEqual(line(notification, [.new]), #"{"event":"change","sub":3,"object":"user:1","keyPath":"address.city","reason":"valueChanged","rev":5,"change":{"kind":1,"new":"Paris"}}"# + "\n")
    }
}
