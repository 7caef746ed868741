import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// `observe` with `sinceRev`: replay from history, resync, and restore from persisted state.
@Suite struct HistoryReplayTests {
    private func resume(_ engine: KVOEngine, _ object: String, _ keyPath: String, since rev: UInt64,
                        _ options: ObservationOptions = [.new, .old], by connection: ConnectionID = ConnectionID(9))
        throws -> (SubscriptionID, [ChangeNotification]) {
        var notifications: [ChangeNotification] = []
        let sub = try engine.observe(object, keyPath: KeyPath(keyPath), options: options, connection: connection,
                                     sinceRev: rev, notifications: &notifications)
        return (sub, notifications)
    }

    /// A comparable rendering of a notification, without who receives it.
    private func summary(_ notification: ChangeNotification) -> String {
        "\(notification.rev) \(notification.reason) \(notification.kind) prior=\(notification.isPrior) "
            + "\(notification.indexes ?? []) old=\(notification.old) new=\(notification.new)"
            + (notification.expired ? " expired" : "")
    }

    @Test func replaysEveryChangeAfterTheRevisionThenContinuesLive() throws {
        let engine = KVOEngine()
        try engine.create("c", ["n": 0])
        for value in 1...5 { try engine.set("c", "n", .int(Int64(value))) }  // revs 2...6
        let (sub, replayed) = try resume(engine, "c", "n", since: 3)
        expectEqual(replayed.map(\.rev), [4, 5, 6])
        expectEqual(replayed.map(\.old), [2, 3, 4])
        expectEqual(replayed.map(\.new), [3, 4, 5])
        #expect(replayed.allSatisfy { $0.reason == .valueChanged && $0.recipients.map(\.subscription) == [sub] })
        let live = try engine.set("c", "n", 6)
        expectEqual(live.map(\.rev), [7], "live delivery continues with no gap")
        expectEqual(live.first?.recipients.map(\.subscription), [sub])
    }

    @Test func resumingAtTheCurrentRevisionReplaysNothing() throws {
        let engine = KVOEngine()
        try engine.create("c", ["n": 0])
        let (_, replayed) = try resume(engine, "c", "n", since: engine.revision, [.new, .initial])
        #expect(replayed.isEmpty, "no initial event when resuming")
    }

    @Test func replayMatchesWhatALiveObserverSaw() throws {
        var random = SplitMix64(state: 42)
        let engine = KVOEngine()
        try engine.create("a1", ["city": "Oslo", "zip": 1])
        try engine.create("a2", ["city": "Paris", "zip": 2])
        try engine.create("p", ["address": .reference(to: "a1"), "items": [["price": 1]], "n": 0])
        let keyPaths = ["n", "address.city", "address", "items", "items.@sum.price", "items.price", "missing.deep"]
        let options: ObservationOptions = [.new, .old, .prior]
        let startRev = engine.revision
        var liveSubs: [SubscriptionID: String] = [:]
        for keyPath in keyPaths {
            liveSubs[try engine.observe("p", keyPath, options, by: ConnectionID(1))] = keyPath
        }
        var seenLive: [String: [String]] = [:]
        for _ in 0..<300 {
            var notifications: [ChangeNotification] = []
            switch Int.random(in: 0..<8, using: &random) {
            case 0: notifications = try engine.set("p", "n", .int(Int64.random(in: 0...3, using: &random)))
            case 1: notifications = try engine.set("p", "address", .reference(to: Bool.random(using: &random) ? "a1" : "a2"))
            case 2:
                // a2 may be deleted at the moment: then the write is refused and notifies nobody.
                notifications = (try? engine.set(Bool.random(using: &random) ? "a1" : "a2", "city",
                                                 .string(["Oslo", "Paris", "Rome"].randomElement(using: &random)!))) ?? []
            case 3: notifications = try engine.mutate("p", "items", .insert(indexes: nil, values: [["price": .int(Int64.random(in: 0...5, using: &random))]]))
            case 4:
                let count = try engine.value("p", "items.@count").intValue!
                if count > 0 { notifications = try engine.mutate("p", "items", .remove(indexes: [Int(count) - 1])) }
            case 5:
                let count = try engine.value("p", "items.@count").intValue!
                if count > 0 { notifications = try engine.set("p", "items.0.price", .int(Int64.random(in: 0...5, using: &random))) }
            case 6:
                // Delete (or let expire) and re-create a referenced object.
                if (try? engine.value("a2", "city")) == nil {
                    notifications = try engine.create("a2", ["city": "Lyon"])
                } else if Bool.random(using: &random) {
                    notifications = try engine.delete("a2")
                } else {
                    try engine.setTTL("a2", milliseconds: 1)
                    engine.writeTime += 1_000
                    _ = try engine.expire("a2", ifRev: engine.revision, notifications: &notifications)
                }
            default: notifications = try engine.set("a1", "zip", .int(Int64.random(in: 0...3, using: &random)))
            }
            for notification in notifications {
                for recipient in notification.recipients {
                    if let keyPath = liveSubs[recipient.subscription] { seenLive[keyPath, default: []].append(summary(notification)) }
                }
            }
        }
        for keyPath in keyPaths {
            let (_, replayed) = try resume(engine, "p", keyPath, since: startRev, options)
            expectEqual(replayed.map(summary), seenLive[keyPath, default: []], "\(keyPath)")
        }
        #expect(!seenLive["address.city", default: []].isEmpty)
        #expect(seenLive["items", default: []].contains { $0.contains("insertion") })
        #expect(seenLive["address.city", default: []].contains { $0.contains("pathChanged") })
        #expect(seenLive["address.city", default: []].contains { $0.contains("pathChanged") && $0.contains("new=null") })
    }

    /// An expiry is kept in history as its own kind of deletion (`RecordedChange.expired`), so that a replay
    /// says `expired` on every ending live delivery marked: an ordinary observation's (and its prior), an id-set
    /// pattern's and a key path pattern's; a plain delete replays without it. Through the store too.
    @Test func anExpiryReplaysAsAnExpiry() throws {
        let engine = KVOEngine(recordsCommitBatches: true)
        engine.writeTime = 1_000
        try engine.create("s:1", ["user": "ada"])
        try engine.create("s:2", ["user": "bob"])
        try engine.setTTL("s:1", milliseconds: 10)
        let start = engine.revision
        let options: ObservationOptions = [.new, .old, .prior]
        let ordinary = try engine.observe("s:1", "user", options, by: ConnectionID(1))
        func observe(_ keyPath: KeyPath?, _ options: ObservationOptions, by connection: ConnectionID, sinceRev: UInt64? = nil,
                     _ notifications: inout [ChangeNotification]) throws -> SubscriptionID {
            try engine.observe(pattern: try ObjectIDPattern("s:*"), keyPath: keyPath, options: options, connection: connection,
                               sinceRev: sinceRev, access: nil, notifications: &notifications)
        }
        var ignored: [ChangeNotification] = []
        let idSet = try observe(nil, [.new], by: ConnectionID(1), &ignored)
        let keyPathPattern = try observe(try KeyPath("user"), options, by: ConnectionID(1), &ignored)
        engine.writeTime = 2_000
        var live: [ChangeNotification] = []
        _ = try engine.expire("s:1", ifRev: engine.revision, notifications: &live)
        live += try engine.delete("s:2")
        func seen(_ sub: SubscriptionID, in notifications: [ChangeNotification]) -> [String] {
            notifications.filter { $0.recipients.contains { $0.subscription == sub } }.map(summary)
        }
        #expect(seen(ordinary, in: live).count == 2 && seen(ordinary, in: live).allSatisfy { $0.hasSuffix(" expired") })
        expectEqual(seen(idSet, in: live).map { $0.hasSuffix(" expired") }, [true, false])
        expectEqual(seen(keyPathPattern, in: live).map { $0.hasSuffix(" expired") }, [true, true, false, false])

        let (_, replayed) = try resume(engine, "s:1", "user", since: start, options)
        expectEqual(replayed.map(summary), seen(ordinary, in: live))
        var patternReplay: [ChangeNotification] = []
        _ = try observe(nil, [.new], by: ConnectionID(2), sinceRev: start, &patternReplay)
        expectEqual(patternReplay.map(summary), seen(idSet, in: live))
        patternReplay = []
        _ = try observe(try KeyPath("user"), options, by: ConnectionID(2), sinceRev: start, &patternReplay)
        expectEqual(patternReplay.map(summary), seen(keyPathPattern, in: live))

        // Stored and loaded (packed): the same kinds come back.
        let directory = TemporaryDirectory()
        let store = try SQLiteStore(directory: directory.path, sync: .normal, historyLimit: 1000, historyByteLimit: 1 << 30)
        try store.commit(engine.takeCommitBatch())
        let restored = try store.load().history
        store.close()
        expectEqual(restored.filter(\.isDeletion).map(\.isExpiry), [true, false])
        expectEqual(restored.last(where: \.isExpiry)?.change, .expired(["user": "ada"]))
    }

    @Test func replayEndsWithSourceDeletedWhenTheObjectWasDeleted() throws {
        let engine = KVOEngine()
        try engine.create("c", ["n": 0])
        try engine.set("c", "n", 1)
        try engine.delete("c")
        let (sub, replayed) = try resume(engine, "c", "n", since: 1)
        expectEqual(replayed.map(\.reason), [.valueChanged, .sourceDeleted])
        expectEqual(replayed.last?.old, 1)
        expectEqual(engine.observationCount, 0, "the subscription ended with the replay")
        expectEqual(engine.unobserve(sub, connection: ConnectionID(9)), false)
        #expect(performing: { _ = try resume(engine, "c", "n", since: engine.revision) },
                throws: { ($0 as? KVOError)?.code == .notFound })
    }

    @Test func resyncWhenHistoryNoLongerReachesBack() throws {
        let engine = KVOEngine(historyLimit: 3)
        try engine.create("c", ["n": 0])
        for value in 1...10 { try engine.set("c", "n", .int(Int64(value))) }  // rev 11
        expectEqual(engine.history.count, 3)
        // Revisions 9, 10 and 11 are kept: resuming from 8 works, from 7 does not.
        expectEqual(try resume(engine, "c", "n", since: 8).1.map(\.rev), [9, 10, 11])
        let (sub, resync) = try resume(engine, "c", "n", since: 7, [.old])
        expectEqual(resync.count, 1)
        #expect(resync[0].reason == .resync && resync[0].rev == 11 && resync[0].new == 10)
        expectEqual(try engine.set("c", "n", 11).first?.recipients.contains { $0.subscription == sub }, true)
        // A revision from the future (the data was wiped) also resyncs.
        expectEqual(try resume(engine, "c", "n", since: 500).1.map(\.reason), [.resync])
    }

    @Test func aByteLimitAlsoBoundsHistory() throws {
        let engine = KVOEngine(historyLimit: 1000, historyByteLimit: 2000)
        try engine.create("c", ["text": ""])
        for index in 0..<50 { try engine.set("c", "text", .string(String(repeating: "x", count: 200 + index))) }
        #expect(engine.history.count < 20)
        #expect(engine.history.bytes <= 2000)
    }

    @Test func aSetIsCountedInHistoryByItsValuesEncodedLengths() throws {
        // Issue 13: the write measured both values already (object sizes), so history takes those
        // lengths instead of walking the values again.
        let engine = KVOEngine()
        try engine.create("c", ["text": "ab"])
        let before = engine.history.bytes
        try engine.set("c", "text", ["k": [1, 22]])
        // 64 per entry + the object id + the key path ("text" and 3) + `"ab"` (4) + `{"k":[1,22]}` (12).
        expectEqual(engine.history.bytes - before, 64 + 1 + 7 + 4 + 12)
    }

    @Test func commitBatchesCarryEveryAcceptedWriteInOrder() throws {
        let engine = KVOEngine(recordsCommitBatches: true)
        try engine.create("a", ["items": [1]])
        try engine.create("b", [:])
        try engine.mutate("a", "items", .insert(indexes: [0], values: [0]))
        _ = try? engine.set("a", "items.x", 1)  // refused: not recorded
        try engine.delete("b")
        let batch = engine.takeCommitBatch()
        expectEqual(batch.revision, 4)
        expectEqual(batch.entries.map(\.rev), [1, 2, 3, 4])
        expectEqual(batch.entries[2].change, .array(ArrayChangeRecord(path: ["items"], kind: .insertion, indexes: [0], old: [], new: [0])))
        #expect(batch.entries[3].object == "b" && batch.entries[3].change == .deleted([:]))
        expectEqual(batch.objects, ["a": .present(["items": [0, 1]]), "b": .deleted])
        #expect(engine.takeCommitBatch().isEmpty)
        #expect(KVOEngine().takeCommitBatch().isEmpty, "in-memory engines collect nothing")
    }

    @Test func restoredEnginesContinueRevisionsAndReplayTheirHistory() throws {
        let state = PersistedState(
            objects: ["c": ["n": 3]], revision: 12,
            history: [
                HistoryEntry(rev: 10, object: "c", change: .set(path: ["n"], old: 0, new: 1)),
                HistoryEntry(rev: 11, object: "c", change: .set(path: ["n"], old: 1, new: 2)),
                HistoryEntry(rev: 12, object: "c", change: .set(path: ["n"], old: 2, new: 3)),
            ])
        let engine = KVOEngine(restoring: state)
        expectEqual(engine.revision, 12)
        expectEqual(try engine.value("c", "n"), 3)
        expectEqual(try resume(engine, "c", "n", since: 10).1.map(\.new), [2, 3])
        // History holds deltas, so a restored engine replays from its oldest entry on; before it, resync.
        expectEqual(try resume(engine, "c", "n", since: 9).1.map(\.new), [1, 2, 3])
        expectEqual(try resume(engine, "c", "n", since: 8).1.map(\.reason), [.resync])
        expectEqual(try engine.set("c", "n", 4).isEmpty, false)
        expectEqual(engine.revision, 13)
    }
}
