import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// The engine alone: no sockets, no loop. Each test builds a fresh engine.
@Suite struct KVOEngineTests {
    let engine = KVOEngine()
    let alice = ConnectionID(1)
    let bob = ConnectionID(2)

    private func path(_ text: String) -> KeyPath { try! KeyPath(text) }

    @discardableResult
    private func set(_ object: String, _ keyPath: String, _ value: JSONValue) throws -> [ChangeNotification] {
        var notifications: [ChangeNotification] = []
        _ = try engine.set(object, keyPath: path(keyPath), value: value, notifications: &notifications)
        return notifications
    }

    private func observe(_ object: String, _ keyPath: String, _ options: ObservationOptions = [.new],
                         by connection: ConnectionID? = nil) throws -> (SubscriptionID, [ChangeNotification]) {
        var notifications: [ChangeNotification] = []
        let sub = try engine.observe(object, keyPath: path(keyPath), options: options,
                                     connection: connection ?? alice, notifications: &notifications)
        return (sub, notifications)
    }

    // MARK: - Objects and revisions

    @Test func createGetAndRevisions() throws {
        expectEqual(engine.revision, 0)
        expectEqual(try engine.create("p", values: ["name": "Ada"]), 1)
        expectEqual(try engine.get("p", keyPath: nil), ["name": "Ada"])
        expectEqual(try engine.get("p", keyPath: path("name")), "Ada")
        expectEqual(try engine.get("p", keyPath: path("missing")), .null)
        #expect(throws: KVOError(.exists, "object 'p' already exists")) { try engine.create("p", values: [:]) }
        expectEqual(engine.revision, 1, "a refused create does not advance the revision")
        try set("p", "name", "Ada")
        expectEqual(engine.revision, 2, "a set that changes nothing still advances the revision")
        var notifications: [ChangeNotification] = []
        expectEqual(try engine.delete("p", notifications: &notifications), 3)
        expectEqual(engine.objectCount, 0)
        #expect(throws: KVOError.self) { try engine.get("p", keyPath: nil) }
    }

    @Test func missingObjectIsNotFound() {
        var notifications: [ChangeNotification] = []
        for attempt in [
            { _ = try engine.get("ghost", keyPath: nil) },
            { _ = try engine.set("ghost", keyPath: path("a"), value: 1, notifications: &notifications) },
            { _ = try engine.delete("ghost", notifications: &notifications) },
            { _ = try engine.observe("ghost", keyPath: path("a"), options: [.new], connection: alice, notifications: &notifications) },
            { _ = try engine.observers(of: "ghost") },
        ] as [() throws -> Void] {
            #expect(performing: attempt, throws: { ($0 as? KVOError)?.code == .notFound })
        }
        expectEqual(engine.revision, 0)
        expectEqual(engine.observationCount, 0)
    }

    @Test func nestedKeyPathsReadAndWrite() throws {
        _ = try engine.create("p", values: ["address": ["city": "London", "zip": "N1"], "age": 36, "gone": .null])
        try set("p", "address.city", "Paris")
        expectEqual(try engine.get("p", keyPath: path("address")), ["city": "Paris", "zip": "N1"])
        // Reading through a missing key or null is null; through a scalar is type_mismatch.
        expectEqual(try engine.get("p", keyPath: path("nope.deeper")), .null)
        expectEqual(try engine.get("p", keyPath: path("gone.deeper")), .null)
        #expect(performing: { _ = try engine.get("p", keyPath: path("age.years")) },
                throws: { ($0 as? KVOError)?.code == .typeMismatch })
        // Writing never creates intermediates.
        let before = try engine.get("p", keyPath: nil)
        let revision = engine.revision
        #expect(performing: { try set("p", "nope.deeper", 1) }, throws: { ($0 as? KVOError)?.code == .notFound })
        #expect(performing: { try set("p", "gone.deeper", 1) }, throws: { ($0 as? KVOError)?.code == .notFound })
        #expect(performing: { try set("p", "age.years", 1) }, throws: { ($0 as? KVOError)?.code == .typeMismatch })
        #expect(performing: { try set("p", "address.city.x", 1) }, throws: { ($0 as? KVOError)?.code == .typeMismatch })
        expectEqual(try engine.get("p", keyPath: nil), before, "a failed set changes nothing")
        expectEqual(engine.revision, revision, "a failed set does not advance the revision")
        // A new leaf key in an existing object is fine.
        try set("p", "address.country", "FR")
        expectEqual(try engine.get("p", keyPath: path("address.country")), "FR")
    }

    @Test func typeMismatchMessageNamesThePath() throws {
        _ = try engine.create("p", values: ["address": ["city": "Oslo"]])
        #expect(throws: KVOError(.typeMismatch, "'address.city' is a string, not an object")) {
            try set("p", "address.city.zip", 1)
        }
    }

    // MARK: - Observing

    @Test func observeWithInitialReportsCurrentValueAtCurrentRevision() throws {
        _ = try engine.create("clock", values: ["date": "2026-11-20"])
        let (sub, notifications) = try observe("clock", "date", [.initial, .new, .old])
        expectEqual(notifications.count, 1)
        let initial = try #require(notifications.first)
        expectEqual(initial.reason, .initial)
        expectEqual(initial.new, "2026-11-20")
        expectEqual(initial.rev, 1)
        expectEqual(initial.recipients.map(\.subscription), [sub])
        let (_, none) = try observe("clock", "date", [.new])
        #expect(none.isEmpty, "no initial event unless asked")
    }

    @Test func observingAMissingKeyIsAllowedAndSeesItAppear() throws {
        _ = try engine.create("p", values: [:])
        let (sub, initial) = try observe("p", "nickname", [.new, .old, .initial])
        expectEqual(initial.first?.new, .null)
        let notifications = try set("p", "nickname", "Bob")
        expectEqual(notifications.count, 1)
        expectEqual(notifications[0].old, .null)
        expectEqual(notifications[0].new, "Bob")
        expectEqual(notifications[0].recipients.map(\.subscription), [sub])
    }

    @Test func subscriptionIDsAreUnique() throws {
        _ = try engine.create("a", values: [:])
        _ = try engine.create("b", values: [:])
        var seen = Set<SubscriptionID>()
        for object in ["a", "b"] {
            for connection in [alice, bob] {
                let (sub, _) = try observe(object, "x", by: connection)
                #expect(seen.insert(sub).inserted)
            }
        }
    }

    @Test func setNotifiesTheKeyPathItsAncestorsAndDescendantsButNotSiblings() throws {
        _ = try engine.create("p", values: ["a": ["b": 1, "c": 2]])
        let (onA, _) = try observe("p", "a")
        let (onAB, _) = try observe("p", "a.b")
        let (onAC, _) = try observe("p", "a.c")
        let (onABD, _) = try observe("p", "a.b.d")

        // a.b changes: a and a.b hear of it; a.c does not; a.b.d stays null (through a number).
        var notifications = try set("p", "a.b", 5)
        expectEqual(Set(notifications.flatMap { $0.recipients.map(\.subscription) }), [onA, onAB])
        let onANotification = try #require(notifications.first { $0.keyPath == "a" })
        expectEqual(onANotification.old, ["b": 1, "c": 2])
        expectEqual(onANotification.new, ["b": 5, "c": 2])

        // Replacing a: a.b hears (5 -> 7), a.c does not (2 == 2), a.b.d hears (null -> true).
        notifications = try set("p", "a", ["b": ["d": true], "c": 2])
        expectEqual(Set(notifications.flatMap { $0.recipients.map(\.subscription) }), [onA, onAB, onABD])
        #expect(!notifications.contains { $0.recipients.contains { $0.subscription == onAC } })
        let deep = try #require(notifications.first { $0.keyPath == "a.b.d" })
        expectEqual(deep.old, .null)
        expectEqual(deep.new, true)
    }

    @Test func aSetThatChangesNothingNotifiesNobody() throws {
        _ = try engine.create("p", values: ["n": 1, "o": ["x": 1]])
        _ = try observe("p", "n", [.new, .old, .prior])
        _ = try observe("p", "o", [.new, .old, .prior])
        #expect(try set("p", "n", 1).isEmpty)
        #expect(try set("p", "n", 1.0).isEmpty, "1 and 1.0 are the same number")
        #expect(try set("p", "o", ["x": 1]).isEmpty, "an equal object is no change")
        expectEqual(engine.revision, 4, "each set still advanced the revision")
    }

    @Test func priorNotificationsComeFirstAndCarryOnlyOld() throws {
        _ = try engine.create("p", values: ["a": ["b": 1]])
        let (priorSub, _) = try observe("p", "a.b", [.new, .old, .prior])
        let (plainSub, _) = try observe("p", "a", [.new])
        let notifications = try set("p", "a.b", 2)
        expectEqual(notifications.count, 3)
        #expect(notifications[0].isPrior)
        expectEqual(notifications[0].old, 1)
        expectEqual(notifications[0].recipients.map(\.subscription), [priorSub], "only prior observers get priors")
        #expect(notifications[1...].allSatisfy { !$0.isPrior })
        expectEqual(Set(notifications[1...].flatMap { $0.recipients.map(\.subscription) }), [priorSub, plainSub])
        #expect(notifications.allSatisfy { $0.rev == engine.revision })
    }

    @Test func changesReachOnlyObserversOfTheChangedObject() throws {
        _ = try engine.create("target", values: ["v": 0])
        for index in 0..<500 {
            _ = try engine.create("other\(index)", values: ["v": 0])
            _ = try observe("other\(index)", "v")
        }
        let (sub, _) = try observe("target", "v")
        let notifications = try set("target", "v", 1)
        expectEqual(notifications.flatMap(\.recipients).map(\.subscription), [sub])
    }

    // MARK: - Ending observations

    @Test func unobserveIsSafeTwiceAndOnlyForTheOwner() throws {
        _ = try engine.create("p", values: ["v": 0])
        let (sub, _) = try observe("p", "v", by: alice)
        expectEqual(engine.unobserve(sub, connection: bob), false, "another connection's sub is not removed")
        expectEqual(engine.observationCount, 1)
        expectEqual(engine.unobserve(sub, connection: alice), true)
        expectEqual(engine.unobserve(sub, connection: alice), false)
        expectEqual(engine.unobserve(987_654, connection: alice), false)
        #expect(try set("p", "v", 1).isEmpty)
        #expect(try engine.observers(of: "p").isEmpty)
    }

    @Test func deleteEndsEveryObservationWithSourceDeleted() throws {
        _ = try engine.create("p", values: ["a": ["b": 1]])
        let (withOld, _) = try observe("p", "a.b", [.new, .old, .prior], by: alice)
        let (onA, _) = try observe("p", "a", [.new], by: bob)
        var notifications: [ChangeNotification] = []
        let rev = try engine.delete("p", notifications: &notifications)
        expectEqual(notifications.count, 3)
        #expect(notifications[0].isPrior && notifications[0].reason == .sourceDeleted)
        let final = notifications[1...]
        #expect(final.allSatisfy { $0.reason == .sourceDeleted && $0.new == .null && $0.rev == rev && !$0.isPrior })
        expectEqual(final.first { $0.keyPath == "a.b" }?.old, 1)
        expectEqual(final.first { $0.keyPath == "a" }?.old, ["b": 1])
        expectEqual(engine.observationCount, 0)
        expectEqual(engine.unobserve(withOld, connection: alice), false)
        expectEqual(engine.unobserve(onA, connection: bob), false)
        // A new object of the same name starts with no observers.
        _ = try engine.create("p", values: ["a": ["b": 1]])
        #expect(try engine.observers(of: "p").isEmpty)
        #expect(try set("p", "a.b", 2).isEmpty)
    }

    @Test func disconnectRemovesOnlyThatConnectionsObservations() throws {
        _ = try engine.create("p", values: ["v": 0])
        _ = try observe("p", "v", by: alice)
        _ = try observe("p", "v.w", by: alice)
        let (bobs, _) = try observe("p", "v", by: bob)
        expectEqual(engine.disconnect(alice), 2)
        expectEqual(engine.disconnect(alice), 0)
        let remaining = try engine.observers(of: "p")
        expectEqual(remaining.map(\.subscription), [bobs])
        expectEqual(try set("p", "v", 1).flatMap(\.recipients).map(\.connection), [bob])
    }

    @Test func infoListsObserversInSubscriptionOrder() throws {
        _ = try engine.create("p", values: [:])
        let (first, _) = try observe("p", "z", [.new, .old], by: bob)
        let (second, _) = try observe("p", "a.b", [.prior, .initial], by: alice)
        let infos = try engine.observers(of: "p")
        #expect(infos == [
            ObserverInfo(subscription: first, keyPath: "z", options: [.new, .old], connection: bob),
            ObserverInfo(subscription: second, keyPath: "a.b", options: [.prior, .initial], connection: alice),
        ])
        expectEqual(infos[1].options.names, ["initial", "prior"])
    }

    @Test func objectIDsAreSorted() throws {
        for id in ["b", "a", "c"] { _ = try engine.create(id, values: [:]) }
        expectEqual(engine.objectIDs(), ["a", "b", "c"])
    }
}
