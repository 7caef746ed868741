import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// Bindings in the engine: bind with filter/convert/now, combineLatest, where their writes' events go,
/// no-op writes skipped, cycle refusal (direct, through other bindings, through computed properties),
/// loops through re-pointed references stopped, removal on delete with the creator's event, refused
/// writes reported, persistence (commit batches and restore).
@Suite struct BindingEngineTests {
    let engine = KVOEngine(recordsCommitBatches: true)
    let creator = ConnectionID(7)

    init() throws {
        try engine.create("a", ["x": 1, "y": 2])
        try engine.create("b", ["y": 0])
    }

    @Test func bindCopiesTheSourceAfterEachChange() throws {
        let (id, initial) = try engine.bind("a:x", to: "b:y")
        #expect(id == 1 && initial.isEmpty)
        expectEqual(try engine.value("b", "y"), 0, "without now, nothing is applied yet")
        let observer = try engine.observe("b", "y")
        let sourceObserver = try engine.observe("a", "x")
        let revision = engine.revision
        let notifications = try engine.set("a", "x", 5)
        expectEqual(try engine.value("b", "y"), 5)
        expectEqual(engine.revision, revision + 2, "the binding's write has a revision of its own")
        #expect(notifications.map { $0.recipients[0].subscription } == [sourceObserver, observer],
                "the binding's write is notified after the write that caused it")
        expectEqual(notifications.map(\.rev), [revision + 1, revision + 2])
    }

    @Test func filterConvertAndNow() throws {
        let (_, now) = try engine.bind("a:x", to: "b:y", filter: "$value > 0", convert: "$value * 10", now: true)
        expectEqual(try engine.value("b", "y"), 10, "now applies the current value at once")
        #expect(now.isEmpty, "nobody observes b.y yet")
        try engine.set("a", "x", -3)
        expectEqual(try engine.value("b", "y"), 10, "filtered out")
        try engine.set("a", "x", 4)
        expectEqual(try engine.value("b", "y"), 40)
    }

    @Test func combineLatestReducesEverySource() throws {
        try engine.combineLatest(["a:x", "a:y", "b:y"], to: "b:sum", reduce: "$0 + $1 + $2", now: true)
        expectEqual(try engine.value("b", "sum"), 3)
        try engine.set("a", "y", 10)
        expectEqual(try engine.value("b", "sum"), 11)
        try engine.set("b", "y", 100)
        expectEqual(try engine.value("b", "sum"), 111)
    }

    @Test func aValueEqualToTheTargetsIsNotWritten() throws {
        try engine.bind("a:x", to: "b:y", convert: "$value > 3")
        try engine.set("a", "x", 5)
        let revision = engine.revision
        try engine.set("a", "x", 6)
        expectEqual(engine.revision, revision + 1, "true again: no second write")
    }

    @Test func cyclesAreRefusedAtCreation() throws {
        try engine.bind("a:x", to: "b:y")
        let refusals: [() throws -> Void] = [
            { _ = try engine.bind("b:y", to: "a:x") },  // two steps
            { _ = try engine.bind("a:x", to: "a:x") },  // itself
            { _ = try engine.bind("a:y", to: "a:y.deep") },  // inside what it reads
            { _ = try engine.combineLatest(["a:y", "b:y"], to: "a:x", reduce: "$0 + $1") },
        ]
        for attempt in refusals {
            #expect(performing: attempt, throws: { ($0 as? KVOError)?.code == .cycle })
        }
        expectEqual(engine.bindingListings().count, 1, "refused bindings leave nothing behind")
        expectEqual(try engine.bind("b:y", to: "a:y").0, 2, "a chain without a loop is fine, and ids are not used up by refusals")
    }

    @Test func cyclesThroughComputedPropertiesAreRefused() throws {
        try engine.defineClass(json: #"{"name": "C", "properties": {"v": {"type": "number"}}, "computed": {"twice": "v * 2"}}"#)
        try engine.create("c", of: "C", ["v": 1])
        #expect(performing: { _ = try engine.bind("c:twice", to: "c:v") }, throws: { ($0 as? KVOError)?.code == .cycle })
        #expect(performing: { _ = try engine.bind("a:x", to: "c:twice") }, throws: { ($0 as? KVOError)?.code == .readOnly })
        #expect(performing: { _ = try engine.bind("a:x", to: "b:list.@count") }, throws: { ($0 as? KVOError)?.code == .badRequest })
        #expect(performing: { _ = try engine.bind("ghost:x", to: "b:y") }, throws: { ($0 as? KVOError)?.code == .notFound })
        try engine.bind("c:twice", to: "b:y", now: true)
        try engine.set("c", "v", 21)
        expectEqual(try engine.value("b", "y"), 42)
    }

    @Test func aLoopThroughAReferenceRePointedLaterIsStopped() throws {
        try engine.create("o1", ["val": 0])
        try engine.create("o2", ["val": 0])
        try engine.create("holder", ["ref": .reference(to: "o1")])
        let (first, _) = try engine.bind("a:x", to: "holder:ref.val", convert: "$value + 1", by: creator)
        try engine.bind("o2:val", to: "a:x", convert: "$value + 1", by: creator)
        try engine.set("holder", "ref", .reference(to: "o2"))  // now a.x -> o2.val -> a.x
        _ = engine.takeBindingEvents()
        try engine.set("a", "x", 100)
        let events = engine.takeBindingEvents()
        expectEqual(events.count, 1)
        guard case let .refused(error) = events.first?.reason else { Issue.record("no refusal"); return }
        expectEqual(error.code, .cycle)
        #expect(events.first?.binding == first || events.first?.binding == first + 1)
        expectEqual(events.first?.creator, creator)
    }

    @Test func deletingASourceOrTargetRemovesTheBindingAndTellsItsCreator() throws {
        try engine.create("c", ["z": 0])
        let (fromA, _) = try engine.bind("a:x", to: "c:z", by: creator)
        let (toB, _) = try engine.bind("c:z", to: "b:y", by: creator)
        try engine.delete("a")
        var events = engine.takeBindingEvents()
        #expect(events == [BindingEvent(binding: fromA, creator: creator,
                                        reason: .removed(cause: "sourceDeleted", object: "a"), rev: engine.revision)])
        try engine.delete("b")
        events = engine.takeBindingEvents()
        expectEqual(events.map(\.binding), [toB])
        expectEqual(events.first?.reason, .removed(cause: "targetDeleted", object: "b"))
        #expect(engine.bindingListings().isEmpty)
        expectEqual(engine.unbind(toB), false)
        try engine.set("c", "z", 9)  // no binding left to apply, nothing breaks
    }

    @Test func aRefusedWriteIsReportedAndChangesNothing() throws {
        try engine.defineClass(json: #"{"name": "Gauge", "properties": {"level": {"type": "number", "max": 10}}}"#)
        try engine.create("g", of: "Gauge", ["level": 1])
        let (id, _) = try engine.bind("a:x", to: "g:level", by: creator)
        let revision = engine.revision
        try engine.set("a", "x", 50)
        expectEqual(try engine.value("g", "level"), 1)
        expectEqual(engine.revision, revision + 1, "only the source's write")
        let events = engine.takeBindingEvents()
        #expect(events.count == 1 && events.first?.binding == id)
        guard case let .refused(error) = events.first?.reason else { Issue.record("no refusal"); return }
        #expect(error.code == .invalidValue && error.details["rule"] == "max")
        #expect(String(decoding: events[0].line, as: UTF8.self).hasPrefix(#"{"event":"binding","binding":1,"reason":"refused","error":{"code":"invalid_value","#))
    }

    @Test func expressionsAreCheckedWhenTheBindingIsMade() throws {
        for (convert, column) in [("$value +", 9), ("x * 2", 1), ("$1 * 2", 1), ("$value * $nope", 10)] {
            #expect("convert \(convert)", performing: { _ = try engine.bind("a:x", to: "b:y", convert: convert) },
                    throws: { error in
                        guard let error = error as? KVOError else { return false }
                        return error.code == .invalidExpression && error.details["column"] == .int(Int64(column))
                    })
        }
        #expect(engine.bindingListings().isEmpty)
    }

    @Test func unbindIsSafeTwice() throws {
        let (id, _) = try engine.bind("a:x", to: "b:y")
        #expect(engine.unbind(id))
        #expect(!engine.unbind(id))
        try engine.set("a", "x", 3)
        expectEqual(try engine.value("b", "y"), 0)
    }

    @Test func definitionsGoToTheStoreAndComeBack() throws {
        _ = engine.takeCommitBatch()
        let (first, _) = try engine.bind("a:x", to: "b:y", filter: "$value != 3")
        let (second, _) = try engine.combineLatest(["a:x", "a:y"], to: "b:sum", reduce: "$0 * $1")
        var batch = engine.takeCommitBatch()
        expectEqual(batch.bindings.keys.sorted(), [first, second])
        expectEqual(batch.lastBindingID, second)
        #expect(engine.bindingListings().first == ["binding": 1, "kind": "bind", "from": ["object": "a", "keyPath": "x"],
                                                   "to": ["object": "b", "keyPath": "y"], "filter": "$value != 3"])
        #expect(engine.unbind(first))
        batch = engine.takeCommitBatch()
        #expect(batch.bindings.count == 1 && batch.bindings[first] == .some(nil), "a removal is recorded as nil")

        var state = PersistedState(objects: ["a": ["x": 1, "y": 2], "b": ["y": 0]], revision: 9)
        state.bindings = [second: try #require(batch.bindings.isEmpty ? nil : engine.bindingListings().first)]
        state.bindings[5] = ["kind": "bind", "from": ["object": "gone", "keyPath": "x"], "to": ["object": "b", "keyPath": "y"]]
        state.lastBindingID = 5
        let restored = KVOEngine(restoring: state)
        expectEqual(restored.restoreProblems, ["binding 5 not restored: object 'gone' does not exist"])
        try restored.set("a", "y", 7)
        expectEqual(try restored.value("b", "sum"), 7)
        expectEqual(try restored.bind("a:y", to: "b:copy").0, 6, "ids are never reused")
    }
}
