import Foundation
import KVOClient
import KVOWireProbe
import Observation
import Testing

@testable import KVOTestSupport

/// `RemoteObject`, the `@Observable` mirror of a kvod object, against the real kvod over TCP: its keys
/// found from the `Codable` type, writes by another connection showing in `value`, a
/// `withObservationTracking` onChange firing when the value changes, deletion setting it nil, a
/// refused observation in `error`, and dropping the mirror unobserving every key.
@Suite(.timeLimit(.minutes(1))) struct KVOClientRemoteObjectTests {
    struct Person: Codable, Sendable, Equatable {
        var name: String
        var age: Int
        var nickname: String?
        var address: Address
        struct Address: Codable, Sendable, Equatable { var city: String }
    }

    /// Yields the main actor until `condition` holds; records an issue after 10 s.
    @MainActor func eventually(_ what: String, _ condition: () -> Bool) async throws {
        let deadline = Date().addingTimeInterval(10)
        while !condition() {
            if Date() > deadline {
                Issue.record("timed out waiting for \(what)")
                return
            }
            try await Task.sleep(nanoseconds: 5_000_000)
        }
    }

    @MainActor @Test("the keys a Codable type decodes are found by decoding it once; nested keys are not top-level keys")
    func keysOfACodableType() throws {
        let person = try RemoteObject<Person>.keys(of: Person.self)
        expectEqual(person, ["name", "age", "nickname", "address"])
        #expect(throws: KVODError.self) { try RemoteObject<[String: Int]>.keys(of: [String: Int].self) }
    }

    @MainActor @Test("writes by another connection appear in value, with their rev; deletion sets value nil")
    func mirrorsAnotherConnectionsWrites() async throws {
        let server = try KVODProcess()
        let kvod = try await server.client()
        let writer = try server.connect()
        _ = try writer.call("create", ["object": "ada", "values": ["name": "Ada", "age": 36, "address": ["city": "London"]]])
        let mirror = try RemoteObject(kvod, "ada", as: Person.self)
        try await mirror.subscribed()
        try await eventually("the initial value") { mirror.value != nil }
        expectEqual(mirror.value, Person(name: "Ada", age: 36, nickname: nil, address: .init(city: "London")))

        let reply = try writer.call("set", ["object": "ada", "keyPath": "address.city", "value": "Paris"])
        try await eventually("the city") { mirror.value?.address.city == "Paris" }
        expectEqual(mirror.rev, reply["rev"]?.intValue)
        _ = try writer.call("set", ["object": "ada", "keyPath": "nickname", "value": "Countess"])
        try await eventually("the nickname") { mirror.value?.nickname == "Countess" }
        #expect(mirror.error == nil)

        // A value that does not decode as Person: value nil, the error says why, and it recovers.
        _ = try writer.call("set", ["object": "ada", "keyPath": "age", "value": "old"])
        try await eventually("the decoding error") { mirror.error != nil }
        expectEqual(mirror.value, nil)
        _ = try writer.call("set", ["object": "ada", "keyPath": "age", "value": 37])
        try await eventually("the age") { mirror.value?.age == 37 }
        #expect(mirror.error == nil)

        _ = try writer.call("delete", ["object": "ada"])
        try await eventually("the deletion") { mirror.isDeleted }
        expectEqual(mirror.value, nil)
        expectEqual(mirror.error?.code, .notFound)
    }

    @MainActor @Test("withObservationTracking's onChange fires when another connection changes the object")
    func observationTrackingFires() async throws {
        let server = try KVODProcess()
        let kvod = try await server.client()
        let writer = try server.connect()
        _ = try writer.call("create", ["object": "ada", "values": ["name": "Ada", "age": 36, "address": ["city": "London"]]])
        let mirror = try RemoteObject(kvod, "ada", as: Person.self)
        try await eventually("the initial value") { mirror.value != nil }

        let fired = FiredFlag()
        let seen = withObservationTracking {
            mirror.value?.age
        } onChange: {
            fired.set()
        }
        expectEqual(seen, 36)
        #expect(!fired.isSet)
        _ = try writer.call("set", ["object": "ada", "keyPath": "age", "value": 37])
        try await eventually("onChange") { fired.isSet }
        try await eventually("the age") { mirror.value?.age == 37 }
    }

    @MainActor @Test("a missing object is reported in error; dropping the mirror unobserves every key on the server")
    func errorsAndLifetime() async throws {
        let server = try KVODProcess()
        let kvod = try await server.client()
        let probe = try server.connectProbe()
        let missing = try RemoteObject(kvod, "nobody", as: Person.self)
        try await eventually("the refusal") { missing.error != nil }
        expectEqual(missing.error?.code, .notFound)
        expectEqual(missing.value, nil)

        try await kvod.create("ada", values: Person(name: "Ada", age: 36, nickname: nil, address: .init(city: "London")))
        do {
            let mirror = try RemoteObject(kvod, "ada", as: Person.self)
            try await mirror.subscribed()
            try await eventuallyObservers(probe, "ada", count: 4)
            withExtendedLifetime(mirror) {}
        }
        try await eventuallyObservers(probe, "ada", count: 0)

        // Explicit keys, and cancel() twice.
        let names = try RemoteObject(kvod, "ada", as: JSONValue.self, keys: ["name"])
        try await names.subscribed()
        try await eventuallyObservers(probe, "ada", count: 1)
        try await eventually("the name") { names.value?["name"]?.stringValue == "Ada" }
        names.cancel()
        names.cancel()
        try await eventuallyObservers(probe, "ada", count: 0)
    }
}

/// Set once by an onChange handler (any thread). `@unchecked Sendable` is sound: `value` is only read or
/// written while `lock` is held.
final class FiredFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}
