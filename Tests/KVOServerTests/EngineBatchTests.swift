import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// The engine's batches (`KVOEngine+Batch`): one revision, one notification pass, all or nothing, and
/// history that replays a batch as one step. Checked against a reference: the same writes applied one by
/// one on a second engine give the same store, and every observer's events are exactly the difference
/// between its reading before the batch and after it.
@Suite struct EngineBatchTests {
    /// Runs `body`'s writes as one batch: committed when it returns, aborted when it throws (then rethrown).
    @discardableResult
    private func batch(_ engine: KVOEngine, _ body: (KVOEngine) throws -> Void) throws -> (rev: UInt64, [ChangeNotification]) {
        try engine.beginBatch()
        do {
            try body(engine)
        } catch {
            engine.abortBatch()
            throw error
        }
        var notifications: [ChangeNotification] = []
        let rev = engine.commitBatch(notifications: &notifications)
        return (rev, notifications)
    }

    @Test func aTransferIsOneRevisionAndObserversNeverSeeHalfOfIt() throws {
        let engine = KVOEngine()
        try engine.create("a", ["balance": 100])
        try engine.create("b", ["balance": 0])
        try engine.create("bank", ["accounts": [.reference(to: "a"), .reference(to: "b")]])
        let subA = try engine.observe("a", "balance")
        let subB = try engine.observe("b", "balance")
        let subTotal = try engine.observe("bank", "accounts.@sum.balance")
        let before = engine.revision
        var partEvents: [ChangeNotification] = []
        var midway: JSONValue = .null
        let (rev, notifications) = try batch(engine) { engine in
            partEvents += try engine.set("a", "balance", 70)
            midway = try engine.value("a", "balance")
            partEvents += try engine.set("b", "balance", 30)
        }
        #expect(partEvents.isEmpty, "a part notifies nobody")
        expectEqual(midway, 70, "a later part reads what an earlier one wrote")
        expectEqual(rev, before + 1)
        expectEqual(engine.revision, rev)
        #expect(notifications.allSatisfy { $0.rev == rev })
        let bySub = Dictionary(grouping: notifications, by: { $0.recipients[0].subscription })
        expectEqual(bySub[subA]?.map(\.new), [70])
        expectEqual(bySub[subB]?.map(\.new), [30])
        #expect(bySub[subTotal] == nil, "the total never changed: no event, not two")
        expectEqual(engine.history.entries(after: before, current: engine.revision)?.map(\.rev), [rev, rev])
    }

    @Test func aRefusedPartUndoesEveryPartBeforeIt() throws {
        let engine = KVOEngine()
        try engine.create("a", ["n": 1, "list": [1, 2]])
        try engine.create("gone", ["n": 1])
        _ = try engine.observe("a", "n")
        let digest = StateDigest.of(engine)
        let revision = engine.revision
        let bytes = engine.storedBytes
        #expect(throws: KVOError.self) {
            try batch(engine) { engine in
                try engine.set("a", "n", 2)
                try engine.set("a", "fresh", ["deep": [1]])
                try engine.mutate("a", "list", .insert(indexes: [0], values: [0]))
                try engine.create("new", ["x": 1])
                try engine.delete("gone")
                try engine.set("missing", "n", 1)  // not_found: the batch fails here
            }
        }
        expectEqual(StateDigest.of(engine), digest)
        expectEqual(engine.revision, revision)
        expectEqual(engine.storedBytes, bytes)
        expectEqual(engine.objectIDs(), ["a", "gone"])
        expectEqual(engine.changedRevision(of: "a"), 1)
        // The store works on as before: the next write is the next revision, and its observer hears of it.
        let after = try engine.set("a", "n", 5)
        expectEqual(after.map(\.old), [1])
        expectEqual(engine.revision, revision + 1)
    }

    @Test func aLoneArrayChangeKeepsItsIndexesAndADeletionEndsObservations() throws {
        let engine = KVOEngine()
        try engine.create("a", ["list": [1, 2]])
        try engine.create("b", ["n": 1])
        let list = try engine.observe("a", "list")
        let n = try engine.observe("b", "n", [.new, .old, .prior])
        let (rev, notifications) = try batch(engine) { engine in
            try engine.mutate("a", "list", .insert(indexes: [2], values: [3]))
            try engine.delete("b")
        }
        let listEvents = notifications.filter { $0.recipients[0].subscription == list }
        expectEqual(listEvents.map(\.kind), [.insertion])
        expectEqual(listEvents.first?.indexes, [2])
        let ended = notifications.filter { $0.recipients[0].subscription == n }
        expectEqual(ended.map(\.reason), [.sourceDeleted, .sourceDeleted])
        expectEqual(ended.map(\.isPrior), [true, false])
        #expect(ended.allSatisfy { $0.rev == rev })
        expectEqual(engine.observationCount, 1, "b's observation ended with b")
    }

    @Test func patternObservationsSeeEachObjectOnceFromBeforeToAfter() throws {
        let engine = KVOEngine()
        try engine.create("o1", ["n": 1])
        var ignored: [ChangeNotification] = []
        let ids = try engine.observe(pattern: try ObjectIDPattern("o*"), keyPath: nil, options: [.new],
                                     connection: KVOEngine.testConnection, sinceRev: nil, notifications: &ignored)
        let values = try engine.observe(pattern: try ObjectIDPattern("o*"), keyPath: try KeyPath("n"), options: [.new, .old],
                                        connection: KVOEngine.testConnection, sinceRev: nil, notifications: &ignored)
        let (_, notifications) = try batch(engine) { engine in
            try engine.set("o1", "n", 2)
            try engine.set("o1", "n", 3)
            try engine.create("o2", ["n": 1])
            try engine.set("o2", "n", 9)
            try engine.create("o3", ["n": 1])
            try engine.delete("o3")
        }
        let idEvents = notifications.filter { $0.recipients[0].subscription == ids }
        expectEqual(idEvents.map { "\($0.reason) \($0.object)" }, ["created o2"], "o3 came and went inside the batch")
        let valueEvents = notifications.filter { $0.recipients[0].subscription == values }
        expectEqual(valueEvents.map { "\($0.object) \($0.old) \($0.new)" }, ["o1 1 3", "o2 null 9"])
    }

    @Test func bindingsTheBatchTriggersRunAfterItWithTheirOwnRevision() throws {
        let engine = KVOEngine()
        try engine.create("a", ["v": 1])
        try engine.create("b", ["v": 0])
        _ = try engine.bind("a:v", to: "b:v")
        let target = try engine.observe("b", "v")
        let (rev, notifications) = try batch(engine) { engine in
            try engine.set("a", "v", 5)
            try engine.set("a", "v", 6)
        }
        let events = notifications.filter { $0.recipients.first?.subscription == target }
        expectEqual(events.map(\.new), [6], "the binding saw the batch's result once")
        expectEqual(events.map(\.rev), [rev + 1])
        expectEqual(engine.revision, rev + 1)
    }

    /// Random batches over objects that refer to each other, with observers of plain, reference, array and
    /// aggregate paths and a pattern observation: each batch's events are exactly each reading's change
    /// across the batch (none when it did not change), the store equals the one made by the same writes one
    /// at a time, a refused batch changes nothing, and `sinceRev` replays the same events live delivery made.
    @Test(arguments: [1, 2, 3])
    func randomBatchesMatchTheReference(seed: UInt64) throws {
        var random = SplitMix64(state: seed)
        let engine = KVOEngine()
        let reference = KVOEngine()
        let ids = ["o0", "o1", "o2", "o3"]
        for target in [engine, reference] {
            for (index, id) in ids.enumerated() {
                try target.create(id, ["n": .int(Int64(index)), "items": [["price": 1]],
                                       "ref": .reference(to: ids[(index + 1) % ids.count])])
            }
        }
        let start = engine.revision
        let keyPaths = ["n", "items", "items.@sum.price", "ref.n", "ref.ref.n"]
        var watched: [SubscriptionID: (object: String, keyPath: String)] = [:]
        for object in ["o0", "o1"] {
            for keyPath in keyPaths { watched[try engine.observe(object, keyPath)] = (object, keyPath) }
        }
        var ignored: [ChangeNotification] = []
        let pattern = try engine.observe(pattern: try ObjectIDPattern("o*"), keyPath: try KeyPath("n"), options: [.new, .old],
                                         connection: KVOEngine.testConnection, sinceRev: nil, notifications: &ignored)
        var live: [SubscriptionID: [String]] = [:]
        for _ in 0..<150 {
            let parts = (0..<Int.random(in: 1...5, using: &random)).map { _ in Self.randomPart(&random, ids: ids) }
            let readings = watched.mapValues { engine.read($0.object, try! KeyPath($0.keyPath)).value }
            let patternReadings = Dictionary(uniqueKeysWithValues: ids.map { id in
                (id, engine.objects.contains(id) ? engine.read(id, try! KeyPath("n")).value : JSONValue.null)
            })
            let existed = Set(ids.filter { engine.objects.contains($0) })
            let digest = StateDigest.of(engine)
            let revision = engine.revision
            let outcome = Result { try batch(engine) { engine in for part in parts { try part(engine) } } }
            guard case let .success((rev, notifications)) = outcome else {
                expectEqual(StateDigest.of(engine), digest, "a refused batch changes nothing")
                expectEqual(engine.revision, revision)
                continue
            }
            // The reference: the same writes, one at a time (they all succeed there too).
            for part in parts { try part(reference) }
            expectEqual(engine.objectIDs(), reference.objectIDs())
            for id in engine.objectIDs() { #expect(engine.objects[id] == reference.objects[id], "object \(id)") }
            #expect(notifications.allSatisfy { $0.rev == rev })
            for (sub, path) in watched {
                let events = notifications.filter { $0.recipients.contains { $0.subscription == sub } && !$0.isPrior }
                let old = readings[sub]!
                if !engine.objects.contains(path.object) {
                    expectEqual(events.map(\.reason), [.sourceDeleted])
                    watched[sub] = nil
                    continue
                }
                let new = engine.read(path.object, try! KeyPath(path.keyPath)).value
                #expect(events.count <= 1, "\(path): one event per batch at most")
                if let event = events.first {
                    expectEqual(Self.applied(event, to: old), new, "\(path) \(event.kind)")
                } else {
                    expectEqual(old, new, "\(path): changed without an event")
                }
                live[sub, default: []] += events.map(Self.summary)
            }
            let patternEvents = notifications.filter { $0.recipients.contains { $0.subscription == pattern } }
            expectEqual(Set(patternEvents.map(\.object)).count, patternEvents.count, "one pattern event per object")
            for event in patternEvents {
                expectEqual(event.old, (existed.contains(event.object) ? patternReadings[event.object]! : .null))
                expectEqual(event.new, (engine.objects.contains(event.object) ? engine.read(event.object, try! KeyPath("n")).value : .null))
            }
        }
        // History replays each batch as one step, exactly as it was delivered live.
        for (sub, path) in watched {
            var replayed: [ChangeNotification] = []
            _ = try engine.observe(path.object, keyPath: try KeyPath(path.keyPath), options: [.new, .old],
                                   connection: ConnectionID(2), sinceRev: start, notifications: &replayed)
            #expect(replayed.map(Self.summary) == live[sub] ?? [], "\(path)")
        }
    }

    /// One random write (some of which fail: a missing object, an index out of range).
    private static func randomPart(_ random: inout SplitMix64, ids: [String]) -> (KVOEngine) throws -> Void {
        let id = ids.randomElement(using: &random)!
        let other = ids.randomElement(using: &random)!
        let number = JSONValue.int(Int64.random(in: 0...4, using: &random))
        switch Int.random(in: 0..<9, using: &random) {
        case 0, 1: return { try $0.set(id, "n", number) }
        case 2: return { try $0.set(id, "ref", .reference(to: other)) }
        case 3: return { try $0.mutate(id, "items", .insert(indexes: nil, values: [["price": number]])) }
        case 4: return { try $0.mutate(id, "items", .remove(indexes: [0])) }
        case 5: return { try $0.set(id, "items.0.price", number) }
        case 6:
            // Only the objects nobody observes directly come and go.
            guard id == "o2" || id == "o3" else { return { try $0.increment(id, "n") } }
            return { engine in
                if engine.objects.contains(id) {
                    try engine.delete(id)
                } else {
                    try engine.create(id, ["n": number, "items": [], "ref": .reference(to: other)])
                }
            }
        case 7: return { try $0.increment(id, "n") }
        default: return { try $0.set("nobody", "n", number) }  // fails: the batch is refused
        }
    }

    private static func summary(_ notification: ChangeNotification) -> String {
        "\(notification.rev) \(notification.reason) \(notification.kind) \(notification.indexes ?? []) old=\(notification.old) new=\(notification.new)"
    }

    /// `value` after `event`: its new value, or for an array change the elements it names applied.
    private static func applied(_ event: ChangeNotification, to value: JSONValue) -> JSONValue {
        guard event.kind != .setting, case var .array(elements) = value, let indexes = event.indexes else { return event.new }
        guard case let .array(new) = event.new else { return event.new }
        switch event.kind {
        case .insertion: for (index, element) in zip(indexes, new) { elements.insert(element, at: index) }
        case .removal: for index in indexes.sorted(by: >) { elements.remove(at: index) }
        case .replacement: for (index, element) in zip(indexes, new) { elements[index] = element }
        case .setting: break
        }
        return .array(elements)
    }
}

extension KVOEngine {
    @discardableResult
    fileprivate func increment(_ object: String, _ keyPath: String) throws -> [ChangeNotification] {
        var notifications: [ChangeNotification] = []
        _ = try increment(object, keyPath: try! KeyPath(keyPath), by: .int(1), notifications: &notifications)
        return notifications
    }
}
