import Foundation
import KVOClient
import KVOWireProbe
import Testing

@testable import KVOTestSupport

/// KVOClient's `batch` (issue 30) against the real kvod: typed parts applied with one revision, each part's
/// result in order, and a refused part a typed error naming it, with nothing written.
@Suite struct KVOClientBatchTests {
    struct Account: Codable, Sendable {
        var balance: Int
        var owner: String
    }

    @Test("a transfer as one batch: one revision, an observer of both accounts sees both changes at it")
    func transferIsOneRevision() async throws {
        let server = try KVODProcess()
        let kvod = try await server.client()
        defer { kvod.close() }
        try await kvod.create("alice", values: Account(balance: 100, owner: "Alice"))
        try await kvod.create("bob", values: Account(balance: 0, owner: "Bob"))
        let observer = try server.connect()
        try observer.call("observe", ["object": "alice", "keyPath": "balance"])
        try observer.call("observe", ["object": "bob", "keyPath": "balance"])
        let result = try await kvod.batch { batch in
            try batch.increment("balance", of: "alice", by: -30, if: [.equals("balance", 100)])
            try batch.set(\Account.balance, of: "bob", to: 30)
            try batch.set("log", of: "alice", to: ["sent 30"], if: [.exists])
        }
        expectEqual(result.rev, 3)
        expectEqual(result.results, [["value": 70], [:], [:]])
        let events = try drainEvents(observer)
        #expect(events.map { $0["rev"] } == [3, 3] && events.map { $0["change"]?["new"] } == [70, 30], "\(events)")
        // The same as a list of operations.
        let again = try await kvod.batch([try .increment("balance", of: "bob", by: 1.5), try .delete("alice", if: [.unchangedSince(3)])])
        #expect(again.rev == 4 && again.results == [["value": 31.5], [:]])
    }

    @Test("a refused part: a typed error with the part's index and its own details; nothing written")
    func refusedPartIsTyped() async throws {
        let server = try KVODProcess()
        let kvod = try await server.client()
        defer { kvod.close() }
        try await kvod.create("acct", values: Account(balance: 100, owner: "Ada"))
        let refused = await kvodError {
            try await kvod.batch { batch in
                try batch.set("balance", of: "acct", to: 0)
                try batch.set("owner", of: "acct", to: "Bo", if: [.equals("owner", "Eve")])
            }
        }
        guard case let .server(code, _, details)? = refused else {
            Issue.record("expected a server error, got \(String(describing: refused))")
            return
        }
        #expect(code == .conflict && details.part == 1 && details.condition == "ifEquals" && details.value == "Ada")
        expectEqual(try await kvod.get("acct", as: Account.self).value.balance, 100, "the first part was undone")
        expectEqual(try await kvod.get("acct", as: Account.self).rev, 1)
    }
}
