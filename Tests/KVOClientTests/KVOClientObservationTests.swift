import Foundation
import KVOClient
import KVOWireProbe
import Testing

@testable import KVOTestSupport

/// KVOClient's observations against the real kvod over TCP: typed changes in order, the sequence ending
/// on `sourceDeleted`, errors from `observe`, unobserve on break, task cancellation and iterator deinit
/// (checked with `info` from an independent KVOWireProbe connection), double cancellation, a thousand
/// tasks observing and cancelling at random, and per-change decoding failures.
@Suite(.timeLimit(.minutes(1))) struct KVOClientObservationTests {
    @Test("the README example: initial, then every change with old and new, in order, each with its write's rev")
    func readmeExample() async throws {
        let server = try KVODProcess()
        let kvod = try await KVOClient.connect(to: .init(host: "127.0.0.1", port: server.port))
        try await kvod.create("clock", values: ["date": "Monday"] as JSONValue)
        let writer = Task {
            var revisions: [Int64] = []
            for day in ["Tuesday", "Wednesday", "Thursday"] { revisions.append(try await kvod.set("date", of: "clock", to: day)) }
            return revisions
        }
        var changes: [Change<String>] = []
        for try await change in kvod.observe("date", of: "clock", options: [.initial, .new, .old], as: String.self) {
            print(change.reason, change.old as Any, change.new as Any, change.rev)
            changes.append(change)
            if changes.count == 4 { break }
        }
        let revisions = try await writer.value
        expectEqual(changes.first?.reason, .initial)
        #expect(changes.first?.new == "Monday" || changes.first?.new == "Tuesday")
        // The initial change carries the revision the observation began at; every later one a write's.
        let later = changes.dropFirst()
        #expect(later.allSatisfy { $0.reason == .valueChanged && $0.kind == .setting && $0.object == "clock" && $0.keyPath == "date" })
        expectEqual(Array(later.map(\.rev)), Array(revisions.suffix(later.count)))
        #expect(later.last?.new == "Thursday" && later.last?.old == "Wednesday")
    }

    @Test("events and replies keep the server's order: changes arrive in rev order, none missing, for pipelined writes from many tasks")
    func orderingOfEventsAndReplies() async throws {
        let server = try KVODProcess()
        let kvod = try await server.client()
        try await kvod.create("o", values: ["n": 0] as JSONValue)
        let observation = try await kvod.subscribe("n", of: "o", options: [.new], as: Int.self)
        let revisions = try await withThrowingTaskGroup(of: Int64.self) { group in
            for value in 1...300 { group.addTask { try await kvod.set("n", of: "o", to: value) } }
            var revisions: [Int64] = []
            for try await rev in group { revisions.append(rev) }
            return revisions.sorted()
        }
        var seen: [Int64] = []
        for try await change in observation {
            seen.append(change.rev)
            if seen.count == revisions.count { break }
        }
        expectEqual(seen, revisions)
        // A write's events come before its reply: once `set` returned, its change is already delivered.
        let next = try await kvod.subscribe("n", of: "o", options: [.new], as: Int.self)
        let rev = try await kvod.set("n", of: "o", to: 1000)
        var iterator = next.makeAsyncIterator()
        expectEqual(try await iterator.next()?.rev, rev)
    }

    @Test("array changes carry kind, indexes and the elements; prior notifications come first")
    func arrayChangesAndPriors() async throws {
        let server = try KVODProcess()
        let kvod = try await server.client()
        try await kvod.create("l", values: ["items": ["a", "b"]] as JSONValue)
        let observation = try await kvod.subscribe("items", of: "l", options: [.new, .old, .prior], as: [String].self)
        try await kvod.insert("items", of: "l", values: ["c"], at: 1)
        try await kvod.remove("items", of: "l", indexes: [0])
        var iterator = observation.makeAsyncIterator()
        let prior = try await iterator.next()
        #expect(prior?.isPrior == true && prior?.kind == .insertion && prior?.indexes == [1])
        let insertion = try await iterator.next()
        #expect(insertion?.isPrior == false && insertion?.kind == .insertion && insertion?.new == ["c"] && insertion?.indexes == [1])
        _ = try await iterator.next()
        let removal = try await iterator.next()
        #expect(removal?.kind == .removal && removal?.old == ["a"] && removal?.indexes == [0])
    }

    @Test("sourceDeleted is the last change; not_found is thrown by the iteration and by subscribe")
    func endingAndRefusal() async throws {
        let server = try KVODProcess()
        let kvod = try await server.client()
        try await kvod.create("doomed", values: ["v": 1] as JSONValue)
        let observation = try await kvod.subscribe("v", of: "doomed", options: [.new, .old], as: Int.self)
        try await kvod.delete("doomed")
        var reasons: [Change<Int>.Reason] = []
        for try await change in observation { reasons.append(change.reason) }
        expectEqual(reasons, [.sourceDeleted])
        let lazy = await kvodError {
            for try await _ in kvod.observe("v", of: "nowhere") {}
        }
        expectEqual(lazy?.code, .notFound)
        let eager = await kvodError { _ = try await kvod.subscribe("v", of: "nowhere") }
        expectEqual(eager?.code, .notFound)
        try await kvod.ping()
    }

    @Test("break, task cancellation and a dropped iterator each unobserve on the server; cancelling twice is harmless")
    func endingTheIterationUnobserves() async throws {
        let server = try KVODProcess()
        let kvod = try await server.client()
        let probe = try server.connectProbe()
        try await kvod.create("o", values: ["n": 0] as JSONValue)

        // break
        for try await _ in kvod.observe("n", of: "o", options: [.initial]) { break }
        try await eventuallyObservers(probe, "o", count: 0)

        // task cancellation, twice, while waiting for a change
        let observing = Task {
            var count = 0
            for try await _ in kvod.observe("n", of: "o", options: [.new]) { count += 1 }
            return count
        }
        try await eventuallyObservers(probe, "o", count: 1)
        observing.cancel()
        observing.cancel()
        expectEqual(try await observing.value, 0)
        try await eventuallyObservers(probe, "o", count: 0)

        // a dropped iterator (after one change)
        do {
            var iterator = kvod.observe("n", of: "o", options: [.initial]).makeAsyncIterator()
            _ = try await iterator.next()
            try await eventuallyObservers(probe, "o", count: 1)
        }
        try await eventuallyObservers(probe, "o", count: 0)

        // a subscribed sequence dropped without being iterated
        do {
            _ = try await kvod.subscribe("n", of: "o")
        }
        try await eventuallyObservers(probe, "o", count: 0)
        // The client still serves.
        #expect(try await kvod.set("n", of: "o", to: 1) > 0)
    }

    @Test("a thousand tasks observe and cancel at random: no observation leaks on the server")
    func thousandTasksObserveAndCancel() async throws {
        let server = try KVODProcess()
        let kvod = try await server.client()
        let probe = try server.connectProbe()
        try await kvod.create("o", values: ["n": 0] as JSONValue)
        let writer = Task {
            var value = 0
            while !Task.isCancelled {
                value += 1
                _ = try? await kvod.set("n", of: "o", to: value)
                try? await Task.sleep(nanoseconds: 1_000_000)
            }
        }
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<1000 {
                group.addTask {
                    let observer = Task {
                        var seen = 0
                        for try await _ in kvod.observe("n", of: "o", options: [.initial, .new]) {
                            seen += 1
                            if task % 3 == 0, seen >= 2 { break }
                        }
                    }
                    try? await Task.sleep(nanoseconds: UInt64.random(in: 0...20_000_000))
                    if Bool.random() { observer.cancel() }
                    if Bool.random() { observer.cancel() }
                    observer.cancel()
                    _ = await observer.result
                }
            }
        }
        writer.cancel()
        try await eventuallyObservers(probe, "o", count: 0)
        try await kvod.ping()
    }

    @Test("a change that does not decode is reported in that change; this and other observations go on")
    func decodingFailureIsPerChange() async throws {
        let server = try KVODProcess()
        let kvod = try await server.client()
        try await kvod.create("o", values: ["n": 1] as JSONValue)
        let typed = try await kvod.subscribe("n", of: "o", options: [.new], as: Int.self)
        let untyped = try await kvod.subscribe("n", of: "o", options: [.new])
        try await kvod.set("n", of: "o", to: "not a number")
        try await kvod.set("n", of: "o", to: 5)
        var typedIterator = typed.makeAsyncIterator()
        let bad = try await typedIterator.next()
        #expect(bad?.new == nil && bad?.rawNew == "not a number")
        guard case .coding? = bad?.decodingError else {
            Issue.record("expected a coding error, got \(String(describing: bad?.decodingError))")
            return
        }
        let good = try await typedIterator.next()
        #expect(good?.new == 5 && good?.decodingError == nil)
        var untypedIterator = untyped.makeAsyncIterator()
        expectEqual(try await untypedIterator.next()?.new, "not a number")
        expectEqual(try await untypedIterator.next()?.new, 5)
    }

    @Test("close ends observations with KVODError.closed and fails later requests")
    func closeEndsEverything() async throws {
        let server = try KVODProcess()
        let kvod = try await server.client()
        try await kvod.create("o", values: ["n": 1] as JSONValue)
        let observation = try await kvod.subscribe("n", of: "o")
        let consumer = Task {
            await kvodError { for try await _ in observation {} }
        }
        try await Task.sleep(nanoseconds: 50_000_000)
        kvod.close()
        kvod.close()
        guard case .closed? = await consumer.value else {
            Issue.record("the observation did not end with .closed")
            return
        }
        guard case .closed? = await kvodError(#_sourceLocation, { try await kvod.ping() }) else {
            Issue.record("a request after close did not fail with .closed")
            return
        }
    }
}
