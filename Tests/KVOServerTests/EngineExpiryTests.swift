import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// Expiry in the engine (`KVOEngine+Expiry`): deadlines from the write time the caller gives (no clock read),
/// refreshed by writes and `touch`, `expire` refused unless due and unchanged, its endings marked `expired`
/// for ordinary, pattern and live query observers, batches undoing it, the store's changes, and restoring.
@Suite struct EngineExpiryTests {
    private func expire(_ engine: KVOEngine, _ object: String, ifRev: UInt64) throws -> [ChangeNotification] {
        var notifications: [ChangeNotification] = []
        _ = try engine.expire(object, ifRev: ifRev, notifications: &notifications)
        return notifications
    }

    @Test func deadlinesFollowTheWriteTimeAndEveryWriteMovesThem() throws {
        let engine = KVOEngine()
        engine.writeTime = 1_000_000
        try engine.create("s", ["n": 0])
        try engine.setTTL("s", milliseconds: 5_000)
        expectEqual(engine.expiry(of: "s"), Expiry(ttl: 5_000, deadline: 1_005_000))
        engine.writeTime = 1_002_000
        try engine.set("s", "n", 1)
        expectEqual(engine.expiry(of: "s")?.deadline, 1_007_000, "a write refreshes")
        engine.writeTime = 1_003_000
        let rev = engine.revision
        expectEqual(try engine.touch("s")?.deadline, 1_008_000)
        expectEqual(engine.revision, rev, "touch writes no value and takes no revision")
        try engine.setTTL("s", milliseconds: 0)
        expectEqual(engine.expiry(of: "s"), nil, "ttl 0 removes it")
        expectEqual(try engine.touch("s"), nil)
        #expect(throws: KVOError.self) { try engine.touch("missing") }
    }

    @Test func expireDeletesOnlyWhatIsDueAndUnchanged() throws {
        let engine = KVOEngine()
        engine.writeTime = 10_000
        try engine.create("s", ["n": 0])
        try engine.setTTL("s", milliseconds: 1_000)
        let created = engine.changedRevision(of: "s")!
        engine.writeTime = 10_999
        #expect(throws: KVOError.self, "not due") { try expire(engine, "s", ifRev: created) }
        engine.writeTime = 10_500
        try engine.set("s", "n", 1)  // deadline 11_500, changed after `created`
        engine.writeTime = 12_000
        let refused = #expect(throws: KVOError.self) { try expire(engine, "s", ifRev: created) }
        expectEqual(refused?.code, .conflict)
        expectEqual(engine.objectCount, 1)
        let observer = try engine.observe("s", "n")
        let events = try expire(engine, "s", ifRev: engine.changedRevision(of: "s")!)
        #expect(engine.objectCount == 0 && engine.expiry(of: "s") == nil)
        #expect(events.map(\.reason) == [.sourceDeleted] && events.allSatisfy(\.expired), "\(events)")
        expectEqual(events.first?.recipients.first?.subscription, observer)
        #expect(throws: KVOError.self, "gone") { try expire(engine, "s", ifRev: 100) }
    }

    @Test func patternAndLiveQueryObserversHearWhyTheObjectWent() throws {
        let engine = KVOEngine()
        engine.writeTime = 0
        try engine.create("sess:1", ["online": true])
        try engine.setTTL("sess:1", milliseconds: 100)
        var ignored: [ChangeNotification] = []
        let ids = try engine.observe(pattern: ObjectIDPattern("sess:*"), keyPath: nil, options: [.new], connection: ConnectionID(1),
                                     notifications: &ignored)
        let online = try engine.observe(pattern: ObjectIDPattern("sess:*"), keyPath: nil, filter: LiveQuery.compile("online"),
                                        options: [.new], connection: ConnectionID(1), notifications: &ignored)
        engine.writeTime = 100
        let events = try expire(engine, "sess:1", ifRev: engine.changedRevision(of: "sess:1")!)
        let bySub = Dictionary(grouping: events, by: { $0.recipients[0].subscription })
        #expect(bySub[ids]?.map(\.reason) == [.sourceDeleted] && bySub[ids]?.first?.expired == true)
        #expect(bySub[online]?.map(\.reason) == [.left] && bySub[online]?.first?.expired == true)
        // An ordinary delete says no such thing.
        try engine.create("sess:2", ["online": true])
        #expect(try engine.delete("sess:2").allSatisfy { !$0.expired })
    }

    @Test func dueObjectsAreAskedForAgainUntilTheyGo() throws {
        let engine = KVOEngine()
        engine.writeTime = 0
        for (id, ttl) in [("a", 300), ("b", 100), ("c", 200)] as [(String, Int64)] {
            try engine.create(id, [:])
            try engine.setTTL(id, milliseconds: ttl)
        }
        expectEqual(engine.nextExpiryCheck, 100)
        expectEqual(engine.expiryCheckAt, 100, "the server's one comparison before a request")
        #expect(engine.dueExpiries(now: 99, retry: 1_000).isEmpty)
        expectEqual(engine.dueExpiries(now: 250, retry: 1_000).map(\.object), ["b", "c"])
        #expect(engine.dueExpiries(now: 250, retry: 1_000).isEmpty, "asked for once, then after the retry")
        expectEqual(engine.nextExpiryCheck, 300)
        expectEqual(engine.expiryCheckAt, 300, "b and c were handed out: their reminders are a second later")
        // `c` refreshed meanwhile: its old reminder is stale.
        engine.writeTime = 260
        try engine.set("c", "v", 1)
        expectEqual(engine.dueExpiries(now: 400, retry: 1_000).map(\.object), ["a"], "c is due at 460 now")
        // c once (its reminder from before the refresh is stale), b asked for again after the retry.
        expectEqual(engine.dueExpiries(now: 1_250, retry: 1_000).map(\.object), ["c", "b"])
        // At most `limit` at a time, earliest first; the rest at the next call.
        for index in 0..<5 {
            try engine.create("bulk\(index)", [:])
            try engine.setTTL("bulk\(index)", milliseconds: 1 + Int64(index))
        }
        expectEqual(engine.dueExpiries(now: 1_300, retry: 1_000, limit: 2).map(\.object), ["bulk0", "bulk1"])
        expectEqual(engine.dueExpiries(now: 1_300, retry: 1_000, limit: 10).map(\.object), ["bulk2", "bulk3", "bulk4"])
        // Thousands of refreshes leave no pile of stale reminders behind.
        for step in 0..<5_000 {
            engine.writeTime = 2_000 + Int64(step)
            try engine.set("a", "v", .int(Int64(step)))
        }
        #expect(engine.expiries.reminderCount < 2 * engine.expiringObjectCount + 70)
    }

    /// The heap's clean-up (it drops stale reminders once they outnumber the objects) keeps the retry time of what
    /// was handed out: a bounded call never hands out one object twice, as the server's steps of 2,000 ask (each
    /// expired before the next call, so the handed-out reminders go stale and the clean-up comes mid-call).
    @Test func aBoundedCallHandsOutEachObjectOnceThroughTheHeapsCleanUp() throws {
        let engine = KVOEngine()
        engine.writeTime = 0
        for index in 0..<1_000 {
            try engine.create("o\(index)", [:])
            try engine.setTTL("o\(index)", milliseconds: 10)
        }
        engine.writeTime = 10
        var expired = 0
        for _ in 0..<10 {
            let due = engine.dueExpiries(now: 10, retry: 1_000, limit: 100)
            expectEqual(Set(due.map(\.object)).count, due.count, "an object handed out twice in one call")
            for (object, changedRev) in due {
                _ = try expire(engine, object, ifRev: changedRev)
                expired += 1
            }
        }
        #expect(expired == 1_000 && engine.expiringObjectCount == 0)
        // An object handed out and still there waits for its retry, whatever the clean-up did meanwhile.
        for index in 0..<100 {
            try engine.create("p\(index)", [:])
            try engine.setTTL("p\(index)", milliseconds: 10)
        }
        expectEqual(engine.dueExpiries(now: 20, retry: 1_000).count, 100)
        for step in 0..<1_000 {  // refreshes of one object: stale reminders, and clean-ups
            engine.writeTime = 20 + Int64(step)
            try engine.setTTL("p0", milliseconds: 5_000)
        }
        #expect(engine.dueExpiries(now: 1_019, retry: 1_000).isEmpty, "none before its retry")
        expectEqual(engine.dueExpiries(now: 1_020, retry: 1_000).count, 99, "p0's deadline moved")
    }

    @Test func aBatchUndoesTheExpiriesItChanged() throws {
        let engine = KVOEngine(recordsCommitBatches: true)
        engine.writeTime = 0
        try engine.create("a", ["n": 0])
        try engine.setTTL("a", milliseconds: 1_000)
        _ = engine.takeAcceptedChanges()
        engine.writeTime = 500
        try engine.beginBatch()
        try engine.set("a", "n", 1)
        try engine.setTTL("a", milliseconds: 9_000)
        try engine.create("b", [:])
        try engine.setTTL("b", milliseconds: 10)
        engine.abortBatch()
        expectEqual(engine.expiry(of: "a"), Expiry(ttl: 1_000, deadline: 1_000))
        expectEqual(engine.expiry(of: "b"), nil)
        try engine.beginBatch()
        try engine.setTTL("a", milliseconds: 9_000)
        var notifications: [ChangeNotification] = []
        _ = engine.commitBatch(notifications: &notifications)
        expectEqual(engine.expiry(of: "a"), Expiry(ttl: 9_000, deadline: 9_500))
        // The store is told b has none (the aborted batch touched it): a row deleted that never was, harmless.
        let expected: [String: Expiry?] = ["a": Expiry(ttl: 9_000, deadline: 9_500), "b": nil]
        expectEqual(engine.takeAcceptedChanges().expiries, expected)
    }

    @Test func theStoreLearnsEachChangeAndARestoredEngineHasThem() throws {
        let engine = KVOEngine(recordsCommitBatches: true)
        engine.writeTime = 100
        try engine.create("keep", [:])
        try engine.setTTL("keep", milliseconds: 50)
        try engine.create("gone", [:])
        try engine.setTTL("gone", milliseconds: 50)
        try engine.delete("gone")
        let changes = engine.takeAcceptedChanges()
        let expected: [String: Expiry?] = ["keep": Expiry(ttl: 50, deadline: 150), "gone": nil]
        expectEqual(changes.expiries, expected)
        #expect(!engine.hasUncommittedWrites)
        engine.writeTime = 120
        _ = try engine.touch("keep")
        #expect(engine.hasUncommittedWrites, "a touch alone is a change to store")
        var state = PersistedState(objects: ["keep": [:], "other": [:]], revision: 9)
        state.expiries = ["keep": Expiry(ttl: 50, deadline: 170), "nobody": Expiry(ttl: 1, deadline: 1)]
        let restored = KVOEngine(restoring: state)
        expectEqual(restored.expiryEntries, ["keep": Expiry(ttl: 50, deadline: 170)], "an expiry of no object is dropped")
        expectEqual(restored.nextExpiryCheck, 170)
    }
}
