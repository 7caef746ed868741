import Foundation
import Observation
import Testing

@testable import KVOClient
@testable import KVOTestSupport

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
        let observation: KVOObservation<String> = kvod.observe("city", of: "list", options: [.initial, .new], as: String.self)
        let seen = ChangeFlag()
        withObservationTracking { _ = model.city } onChange: { seen.set() }
        for try await change in observation {
            model.city = change.new ?? ""
            break
        }
        expectEqual(model.city, "Paris")
        #expect(seen.isSet)
        kvod.close()
    }

    @Test("a request while kvod is down fails with timedOut within requestTimeout")
    func requestTimeoutWhileDown() async throws {
        let server = try KVODProcess()
        var configuration = server.clientConfiguration(reconnection: .init(initialDelay: 0.05, maximumDelay: 0.5))
        configuration.requestTimeout = 2
        let kvod = try await KVOClient.connect(to: configuration)
        try await kvod.ping()
        _ = server.stop()
        let started = Date()
        let error = await kvodError { try await kvod.set("n", of: "o", to: 1) }
        let elapsed = Date().timeIntervalSince(started)
        guard case let .timedOut(operation)? = error else {
            Issue.record("expected timedOut, got \(String(describing: error))")
            return
        }
        expectEqual(operation, "set")
        // requestTimeout is 2 s; before the fix it was still pending after 39 s. Room for a loaded machine under
        // TSan (11.9 s seen in CI with both cores busy).
        #expect(elapsed < 25, "took \(elapsed) s")
        kvod.close()
    }

    @Test("cancelling a request's task while kvod is down ends it at once with CancellationError")
    func cancellationWhileDown() async throws {
        let server = try KVODProcess()
        var configuration = server.clientConfiguration()
        configuration.requestTimeout = nil
        let kvod = try await KVOClient.connect(to: configuration)
        try await kvod.ping()
        _ = server.stop()
        let task = Task { try await kvod.set("n", of: "o", to: 1) }
        // Cancelled once the client holds the set for the next connection (kvod is down), not after a while.
        let isHeld = { kvod.core.state.withLock { $0.pending.values.contains { $0.op == "set" && $0.generation == 0 } } }
        let deadline = Date().addingTimeInterval(10)
        while !isHeld(), Date() < deadline { try await Task.sleep(nanoseconds: 5_000_000) }
        #expect(isHeld(), "the set was not held for the next connection")
        let started = Date()
        task.cancel()
        let result = await task.result
        let elapsed = Date().timeIntervalSince(started)
        switch result {
        case .success: Issue.record("the set succeeded with kvod stopped")
        case let .failure(error): #expect(error is CancellationError, "got \(error)")
        }
        // Before the fix the request never ended; the bound leaves room for a loaded machine (the full suite
        // runs tests in parallel: 1.8 s was seen there), not a speed goal.
        #expect(elapsed < 5, "took \(elapsed) s")
        // The client still works for other requests (none is left pending behind the cancelled one).
        expectEqual(kvod.liveObservationCount, 0)
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
