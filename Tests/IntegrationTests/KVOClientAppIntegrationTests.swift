import Foundation
import KVOClient
import Observation
import Testing

/// A model an app declares with the Observation module's `@Observable` macro, in a file that imports
/// KVOClient too: this file compiles only while no public name of KVOClient shadows the Observation
/// module (issue 29: a public `Observation<Value>` made the macro's `Observation.ObservationRegistrar` fail).
@Observable
final class KVOClientAppModel: @unchecked Sendable {
    var city = ""
}

/// KVOClient beside the toolchain's modules an app imports with it, and requests while kvod is down.
@Suite struct KVOClientAppIntegrationTests {
    @Test("an @Observable model and a KVOObservation in one file: the model follows the server's value")
    func observableBesideKVOClient() async throws {
        let server = try KVODProcess()
        let kvod = try await server.client()
        try await kvod.create("list", values: ["city": "Paris"] as JSONValue)
        let model = KVOClientAppModel()
        let observation: KVOObservation<String> = kvod.observe("list", "city", options: [.initial, .new], as: String.self)
        let seen = ChangeFlag()
        withObservationTracking { _ = model.city } onChange: { seen.set() }
        for try await change in observation {
            model.city = change.new ?? ""
            break
        }
        #expect(model.city == "Paris")
        #expect(seen.isSet)
        kvod.close()
    }
}

/// Set once from `withObservationTracking`'s `onChange` (any thread).
private final class ChangeFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}
