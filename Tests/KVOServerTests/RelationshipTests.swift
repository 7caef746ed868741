import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// References (`{"$ref": id}`), re-binding and `pathChanged`, at the engine level.
@Suite struct RelationshipTests {
    let engine = KVOEngine()

    /// person.address -> addr1 {city: Oslo}; addr2 {city: Paris}.
    private func seedPeople() throws {
        try engine.create("addr1", ["city": "Oslo"])
        try engine.create("addr2", ["city": "Paris"])
        try engine.create("person", ["name": "Ada", "address": .reference(to: "addr1")])
    }

    @Test func getAndSetFollowReferences() throws {
        try seedPeople()
        expectEqual(try engine.value("person", "address.city"), "Oslo")
        expectEqual(try engine.value("person", "address"), ["$ref": "addr1"], "the reference itself is a value")
        try engine.set("person", "address.city", "Bergen")
        expectEqual(try engine.value("addr1", "city"), "Bergen", "set through a reference writes the target")
        expectEqual(try engine.get("person", keyPath: nil), ["name": "Ada", "address": ["$ref": "addr1"]])
    }

    @Test func aChangeInTheReferencedObjectNotifiesValueChanged() throws {
        try seedPeople()
        let sub = try engine.observe("person", "address.city")
        let notifications = try engine.set("addr1", "city", "Bergen")
        expectEqual(notifications.count, 1)
        let change = try #require(notifications.first)
        expectEqual(change.reason, .valueChanged)
        expectEqual(change.object, "person")
        expectEqual(change.keyPath, "address.city")
        #expect(change.old == "Oslo" && change.new == "Bergen")
        expectEqual(change.recipients.map(\.subscription), [sub])
    }

    @Test func repointingAReferenceRebindsWithPathChanged() throws {
        try seedPeople()
        let sub = try engine.observe("person", "address.city")
        let notifications = try engine.set("person", "address", .reference(to: "addr2"))
        let change = try #require(notifications.first)
        expectEqual(notifications.count, 1)
        expectEqual(change.reason, .pathChanged)
        #expect(change.old == "Oslo" && change.new == "Paris")
        expectEqual(change.recipients.map(\.subscription), [sub])
        // The old target no longer notifies; the new one does.
        #expect(try engine.set("addr1", "city", "Trondheim").isEmpty)
        let later = try engine.set("addr2", "city", "Lyon")
        expectEqual(later.first?.reason, .valueChanged)
        #expect(later.first?.old == "Paris" && later.first?.new == "Lyon")
    }

    @Test func deletingAndRecreatingTheReferencedObject() throws {
        try seedPeople()
        let sub = try engine.observe("person", "address.city")
        var notifications = try engine.delete("addr1")
        expectEqual(notifications.count, 1)
        expectEqual(notifications[0].reason, .pathChanged, "deleting a referenced object does not end the observation")
        #expect(notifications[0].old == "Oslo" && notifications[0].new == .null)
        expectEqual(engine.observationCount, 1)
        expectEqual(try engine.value("person", "address.city"), .null)

        notifications = try engine.create("addr1", ["city": "Reykjavik"])
        expectEqual(notifications.count, 1)
        expectEqual(notifications[0].reason, .pathChanged)
        #expect(notifications[0].old == .null && notifications[0].new == "Reykjavik")
        expectEqual(notifications[0].recipients.map(\.subscription), [sub])
        // Bound again: the re-created object's changes notify.
        expectEqual(try engine.set("addr1", "city", "Akureyri").first?.new, "Akureyri")
    }

    @Test func deletingTheObservedRootEndsTheObservation() throws {
        try seedPeople()
        _ = try engine.observe("person", "address.city")
        let notifications = try engine.delete("person")
        expectEqual(notifications.map(\.reason), [.sourceDeleted])
        expectEqual(notifications[0].old, "Oslo")
        expectEqual(engine.observationCount, 0)
        #expect(try engine.set("addr1", "city", "Bergen").isEmpty, "nothing is left registered on the old target")
    }

    @Test func writingThroughABrokenReferenceIsNotFound() throws {
        try engine.create("person", ["address": .reference(to: "nowhere")])
        #expect(performing: { try engine.set("person", "address.city", "x") },
                throws: { ($0 as? KVOError)?.code == .notFound })
        expectEqual(try engine.value("person", "address.city"), .null)
        expectEqual(engine.revision, 1)
    }

    @Test func referenceCyclesDoNotLoop() throws {
        try engine.create("a", ["name": "A", "next": .reference(to: "b")])
        try engine.create("b", ["name": "B", "next": .reference(to: "a")])
        expectEqual(try engine.value("a", "next.next.next.name"), "B")
        let deep = Array(repeating: "next", count: 63).joined(separator: ".") + ".name"
        expectEqual(try engine.get("a", keyPath: try! KeyPath(deep)), "B")
        _ = try engine.observe("a", "next.next.name")
        let notifications = try engine.set("a", "name", "A2")
        expectEqual(notifications.first?.new, "A2")
        // A stored object that looks like a reference is not followed from the root.
        try engine.create("c", ["$ref": "a"])
        expectEqual(try engine.value("c", "name"), .null)
    }

    @Test func keyPathsHaveAMaximumDepth() {
        let tooDeep = Array(repeating: "next", count: KeyPath.maximumDepth + 1).joined(separator: ".")
        #expect(throws: KVOError.self) { _ = try KeyPath(tooDeep) }
    }

    @Test func aRepointToAnEqualValueStillTellsOfTheNewBinding() throws {
        try engine.create("addr1", ["city": "Oslo"])
        try engine.create("addr2", ["city": "Oslo"])
        try engine.create("person", ["address": .reference(to: "addr1")])
        _ = try engine.observe("person", "address.city")
        let notifications = try engine.set("person", "address", .reference(to: "addr2"))
        expectEqual(notifications.first?.reason, .pathChanged)
        #expect(notifications.first?.old == "Oslo" && notifications.first?.new == "Oslo")
    }

    @Test func observersOfTheReferenceItselfSeeAPlainValueChange() throws {
        try seedPeople()
        _ = try engine.observe("person", "address")
        let notifications = try engine.set("person", "address", .reference(to: "addr2"))
        expectEqual(notifications.first?.reason, .valueChanged)
        expectEqual(notifications.first?.new, ["$ref": "addr2"])
        #expect(try engine.set("addr2", "city", "Lyon").isEmpty, "observing the reference is not observing the target")
    }

    @Test func manyObjectsReferToOneTarget() throws {
        try engine.create("hq", ["city": "Oslo"])
        var subs: [SubscriptionID] = []
        for index in 0..<10 {
            try engine.create("emp\(index)", ["office": .reference(to: "hq")])
            subs.append(try engine.observe("emp\(index)", "office.city"))
        }
        let notifications = try engine.set("hq", "city", "Bergen")
        expectEqual(Set(notifications.flatMap(\.recipients).map(\.subscription)), Set(subs))
        #expect(notifications.allSatisfy { $0.reason == .valueChanged && $0.new == "Bergen" })
    }
}
