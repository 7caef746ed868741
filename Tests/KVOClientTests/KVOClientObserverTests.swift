import Foundation
import KVOClient
import KVOWireProbe
import Testing

@testable import KVOTestSupport

/// Issue 29, item 4: the observer-weak form (`observe(..., observer: self) { observer, change in }`) against
/// the real kvod: the observer is not kept alive by its observation, and when it is deallocated the server
/// observation ends (`info` from an independent connection).
@Suite(.timeLimit(.minutes(1))) struct KVOClientObserverTests {
    /// The README's token example, in the observer-weak form: the token lives in the label.
    @MainActor final class ClockLabel {
        var text = ""
        var tokens: Set<ObservationToken> = []

        init(_ kvod: KVOClient) {
            kvod.observe("date", of: "clock", options: [.initial, .new], as: String.self, observer: self) { label, change in
                MainActor.preconditionIsolated()
                label.text = change.new ?? ""
            }.store(in: &tokens)
        }

        func waitFor(_ text: String) async throws {
            let deadline = Date().addingTimeInterval(10)
            while self.text != text {
                if Date() > deadline {
                    Issue.record("text is '\(self.text)', expected '\(text)'")
                    return
                }
                try await Task.sleep(nanoseconds: 5_000_000)
            }
        }
    }

    /// An actor observer: its handler runs isolated to it.
    actor Tally {
        var values: [Int] = []
        var tokens: Set<ObservationToken> = []

        func start(_ kvod: KVOClient) {
            kvod.observe("n", of: "o", as: Int.self, observer: self) { tally, change in
                tally.values.append(change.new ?? -1)
            }.store(in: &tokens)
        }

        func subscribed() async throws { try await tokens.first?.subscribed() }
    }

    /// An observer that keeps no token.
    @MainActor final class Counter {
        var count = 0
    }

    @MainActor @Test("an observer holding its token is freed when let go, and its server observation ends")
    func observerFreedUnobserves() async throws {
        let server = try KVODProcess()
        let kvod = try await server.client()
        let probe = try server.connectProbe()
        try await kvod.create("clock", values: ["date": "Monday"] as JSONValue)
        var label: ClockLabel? = ClockLabel(kvod)
        try await label?.tokens.first?.subscribed()
        try await label?.waitFor("Monday")
        try await kvod.set("date", of: "clock", to: "Tuesday")
        try await label?.waitFor("Tuesday")
        try await eventuallyObservers(probe, "clock", count: 1)

        weak var weakLabel = label
        label = nil
        #expect(weakLabel == nil)
        try await eventuallyObservers(probe, "clock", count: 0)
        expectEqual(kvod.liveObservationCount, 0)
    }

    @MainActor @Test("a token kept elsewhere ends its observation at the first change after the observer is gone, without calling the handler")
    func tokenKeptElsewhere() async throws {
        let server = try KVODProcess()
        let kvod = try await server.client()
        let probe = try server.connectProbe()
        try await kvod.create("o", values: ["n": 0] as JSONValue)
        var counter: Counter? = Counter()
        var calls = 0
        let token = kvod.observe("n", of: "o", as: Int.self, observer: counter!) { counter, _ in
            counter.count += 1
            calls += 1
        }
        try await token.subscribed()
        try await kvod.set("n", of: "o", to: 1)
        let deadline = Date().addingTimeInterval(10)
        while calls < 1, Date() < deadline { try await Task.sleep(nanoseconds: 5_000_000) }
        expectEqual(counter?.count, 1)

        weak var weakCounter = counter
        counter = nil
        #expect(weakCounter == nil)
        try await kvod.set("n", of: "o", to: 2)
        try await eventuallyObservers(probe, "o", count: 0)
        try await token.finished()
        #expect(token.isCancelled)
        expectEqual(calls, 1)
    }

    @Test("an actor observer gets its changes isolated to it, in order, and ends its observation when freed")
    func actorObserver() async throws {
        let server = try KVODProcess()
        let kvod = try await server.client()
        let probe = try server.connectProbe()
        try await kvod.create("o", values: ["n": 0] as JSONValue)
        var tally: Tally? = Tally()
        await tally?.start(kvod)
        try await tally?.subscribed()
        for value in 1...20 { try await kvod.set("n", of: "o", to: value) }
        let deadline = Date().addingTimeInterval(10)
        while (await tally?.values.count ?? 0) < 20, Date() < deadline { try await Task.sleep(nanoseconds: 5_000_000) }
        expectEqual(await tally?.values, Array(1...20))

        weak var weakTally = tally
        tally = nil
        #expect(weakTally == nil)
        try await eventuallyObservers(probe, "o", count: 0)
    }
}
