import Foundation
import KVOClient
import Testing

@testable import KVOTestSupport

/// `KVOClient.subscribe(..., sinceRev:)` against the real kvod over TCP: the changes after a revision the
/// caller saw come first, in order, then live ones.
@Suite(.timeLimit(.minutes(1))) struct KVOClientSinceRevTests {
    @Test("subscribe(sinceRev:) replays the changes after that revision, then live ones, each once")
    func replaysHistoryThenLive() async throws {
        let server = try KVODProcess()
        let kvod = try await server.client()
        let base = try await kvod.create("o", values: ["n": 0] as JSONValue)
        var revisions: [Int64] = []
        for value in 1...3 { revisions.append(try await kvod.set("n", of: "o", to: value)) }
        let observation = try await kvod.subscribe("n", of: "o", options: [.new, .initial], as: Int.self, sinceRev: base)
        revisions.append(try await kvod.set("n", of: "o", to: 4))
        var changes: [Change<Int>] = []
        for try await change in observation {
            changes.append(change)
            if changes.count == 4 { break }
        }
        expectEqual(changes.map(\.new), [1, 2, 3, 4])
        expectEqual(changes.map(\.rev), revisions)
        #expect(changes.allSatisfy { $0.reason == .valueChanged })
    }
}
