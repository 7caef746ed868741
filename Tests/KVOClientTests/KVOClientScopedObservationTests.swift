import Foundation
import KVOClient
import KVOWireProbe
import Testing

@testable import KVOTestSupport

/// Issue 29, item 3: ending an observation deterministically. `examples/observe-break` is top-level code
/// (where the compiler keeps a `for try await` loop's iterator until the program ends) that breaks out of
/// three loops against a real kvod and waits after each; the test asks kvod with `info` (from an independent
/// connection) whether the observer is gone while the program still runs. Beside it, `cancel()` and
/// `withObservation` from ordinary async code.
@Suite(.timeLimit(.minutes(1))) struct KVOClientScopedObservationTests {
    /// Reads `child`'s stdout until `marker`; records an issue when it does not come.
    private func readUntil(_ marker: String, from child: KVOClientProcess, sourceLocation: SourceLocation = #_sourceLocation) {
        while let line = child.nextLine(timeout: 20) {
            if line == marker { return }
        }
        Issue.record("no '\(marker)' line from kvod-observe-break", sourceLocation: sourceLocation)
    }

    @Test("top-level code: withObservation and cancel() unobserve when the loop breaks, while the program runs; a plain loop does not")
    func topLevelBreak() async throws {
        let server = try KVODProcess()
        let probe = try server.connectProbe()
        _ = try probe.call("create", ["object": "clock", "values": ["date": "Monday"]])
        let child = try KVOClientProcess([String(server.port)], executable: "kvod-observe-break", writableStandardInput: true)

        // The README's first example: withObservation, break.
        readUntil("withObservation", from: child)
        try await eventuallyObservers(probe, "clock", count: 0, timeout: 2)
        child.sendLine()

        // The sequence's cancel() after the loop.
        readUntil("cancel", from: child)
        try await eventuallyObservers(probe, "clock", count: 0, timeout: 2)
        child.sendLine()

        // A plain top-level loop keeps its observation until the program ends (the compiler keeps the
        // iterator): why the README's first example uses withObservation. Should a compiler end the iterator's
        // lifetime at the `break`, this count becomes 0 and this expectation is the one to drop.
        readUntil("plain", from: child)
        // Time: an unobserve would come from the child's own tasks, with nothing after it to wait for instead.
        try await Task.sleep(nanoseconds: 200_000_000)
        let plain = try probe.call("info", ["object": "clock"])["observers"]?.arrayValue ?? []
        expectEqual(plain.count, 1)
        child.sendLine()

        let result = child.finish()
        expectEqual(result.status, 0, "\(result.stderr)")
        try await eventuallyObservers(probe, "clock", count: 0)
    }

    @Test("cancel() on the sequence ends a waiting loop with nil, unobserves, is safe twice, and ends later iterations at once")
    func cancelEndsIteration() async throws {
        let server = try KVODProcess()
        let kvod = try await server.client()
        let probe = try server.connectProbe()
        try await kvod.create("o", values: ["n": 0] as JSONValue)
        let changes = kvod.observe("n", of: "o", options: [.initial, .new], as: Int.self)
        let loop = Task {
            var seen: [Int] = []
            for try await change in changes { seen.append(change.new ?? -1) }
            return seen
        }
        try await eventuallyObservers(probe, "o", count: 1)
        try await kvod.set("n", of: "o", to: 1)
        // A copy of the sequence cancels the same iterations.
        let copy = changes
        copy.cancel()
        copy.cancel()
        #expect(changes.isCancelled)
        try await eventuallyObservers(probe, "o", count: 0)
        let seen = try await loop.value
        expectEqual(seen.first, 0)
        #expect(seen.count <= 2)
        // A new iteration of a cancelled sequence ends at once, without observing.
        var again = changes.makeAsyncIterator()
        expectEqual(try await again.next(), nil)
        try await kvod.ping()
        #expect(try probe.call("info", ["object": "o"])["observers"]?.arrayValue?.count ?? 0 == 0)
    }

    @Test("cancel() on a sequence from subscribe that was never iterated unobserves")
    func cancelStarted() async throws {
        let server = try KVODProcess()
        let kvod = try await server.client()
        let probe = try server.connectProbe()
        try await kvod.create("o", values: ["n": 0] as JSONValue)
        let changes = try await kvod.subscribe("n", of: "o", as: Int.self)
        try await eventuallyObservers(probe, "o", count: 1)
        changes.cancel()
        try await eventuallyObservers(probe, "o", count: 0)
        expectEqual(kvod.liveObservationCount, 0)
    }

    @Test("withObservation unobserves when its closure returns or throws, and throws a refusal before the closure")
    func withObservationScopes() async throws {
        struct Stop: Error {}
        let server = try KVODProcess()
        let kvod = try await server.client()
        let probe = try server.connectProbe()
        try await kvod.create("o", values: ["n": 0] as JSONValue)

        let first = try await kvod.withObservation("n", of: "o", options: [.initial, .new], as: Int.self) { changes in
            // Observing already: the server counts it before the first change is read.
            expectEqual(try probe.call("info", ["object": "o"])["observers"]?.arrayValue?.count, 1)
            for try await change in changes { return change.new }
            return nil
        }
        expectEqual(first, 0)
        try await eventuallyObservers(probe, "o", count: 0)

        await #expect(throws: Stop.self) {
            try await kvod.withObservation("n", of: "o", as: Int.self) { changes in
                try await kvod.set("n", of: "o", to: 5)
                for try await _ in changes { throw Stop() }
            }
        }
        try await eventuallyObservers(probe, "o", count: 0)

        let refusal = await kvodError {
            try await kvod.withObservation("n", of: "missing", as: Int.self) { _ -> Void in
                Issue.record("the closure ran for a refused observation")
            }
        }
        expectEqual(refusal?.code, .notFound)
        expectEqual(kvod.liveObservationCount, 0)
    }

    @Test("an iteration keeps its client open after the last other reference to the client is dropped")
    func iterationKeepsClient() async throws {
        let server = try KVODProcess()
        let writer = try await server.client()
        try await writer.create("o", values: ["n": 0] as JSONValue)
        // Neither the client nor the sequence is kept: only the iterator.
        var iterator = try await server.client().subscribe("n", of: "o", as: Int.self).makeAsyncIterator()
        try await writer.set("n", of: "o", to: 1)
        expectEqual(try await iterator.next()?.new, 1)
    }
}
