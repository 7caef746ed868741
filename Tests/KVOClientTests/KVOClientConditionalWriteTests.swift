import Foundation
import KVOClient
import KVOWireProbe
import Testing

@testable import KVOTestSupport

/// KVOClient's conditional writes and `update` (issue 30) against the real kvod: two clients racing a
/// read-modify-write lose no update; a failed condition is a typed `conflict` with its details.
@Suite struct KVOClientConditionalWriteTests {
    struct Account: Codable, Sendable {
        var balance: Int
        var owner: String
    }

    @Test("two clients racing update 150 times each on one counter lose no update")
    func racingUpdatesLoseNothing() async throws {
        let server = try KVODProcess()
        let first = try await server.client()
        let second = try await server.client()
        defer {
            first.close()
            second.close()
        }
        try await first.create("acct", values: Account(balance: 0, owner: "Ada"))
        let rounds = 150  // 300 racing read-modify-writes: a lost update would show in the total
        async let a: Void = Self.increments(first, rounds)
        async let b: Void = Self.increments(second, rounds)
        _ = try await (a, b)
        expectEqual(try await first.get("balance", of: "acct", as: Int.self).value, 2 * rounds)
        // Through a typed key path too.
        let (value, _) = try await second.update(\Account.balance, of: "acct") { ($0 ?? 0) - 5 }
        expectEqual(value, 2 * rounds - 5)
        expectEqual(try await first.get("balance", of: "acct", as: Int.self).value, 2 * rounds - 5)
    }

    /// `rounds` read-modify-writes adding 1, each through `update`.
    private static func increments(_ kvod: KVOClient, _ rounds: Int) async throws {
        for _ in 0..<rounds {
            try await kvod.update("balance", of: "acct", as: Int.self) { ($0 ?? 0) + 1 }
        }
    }

    @Test("a condition that does not hold is a typed conflict with the current value; the helper's transform may end it")
    func conflictDetails() async throws {
        let server = try KVODProcess()
        let kvod = try await server.client()
        defer { kvod.close() }
        expectEqual(try await kvod.create("acct", values: Account(balance: 100, owner: "Ada"), if: [.absent]), 1)
        let again = await kvodError { try await kvod.create("acct", if: [.absent]) }
        expectEqual(again?.code, .conflict)
        expectEqual(try await kvod.set("balance", of: "acct", to: 90, if: [.exists, .equals("balance", 100)]), 2)
        let stale = await kvodError { try await kvod.set("balance", of: "acct", to: 80, if: [.equals("balance", 100)]) }
        guard case let .server(code, _, details)? = stale else {
            Issue.record("expected a server error, got \(String(describing: stale))")
            return
        }
        #expect(code == .conflict && details.condition == "ifEquals" && details.value == 90 && details.rev == 2)
        #expect(try await kvod.get("balance", of: "acct", as: Int.self) == (90, 2))
        // ifRev: any revision read guards a whole-object write; a later change makes it a conflict.
        let (_, read) = try await kvod.get("acct", as: Account.self)
        expectEqual(try await kvod.set("owner", of: "acct", to: "Bo", if: [.unchangedSince(read)]), 3)
        let late = await kvodError { try await kvod.set("owner", of: "acct", to: "Cy", if: [.unchangedSince(read)]) }
        guard case let .server(.conflict, _, lateDetails)? = late else {
            Issue.record("expected conflict, got \(String(describing: late))")
            return
        }
        #expect(lateDetails.condition == "ifRev" && lateDetails.changedRev == 3)
        // Two conditions of one kind would leave one of them unsaid: refused before anything is sent.
        let twice = await kvodError { try await kvod.set("owner", of: "acct", to: "Di", if: [.equals("owner", "Bo"), .equals("balance", 90)]) }
        guard case .coding? = twice else {
            Issue.record("expected a coding error, got \(String(describing: twice))")
            return
        }
        // A missing key is nil to the transform; throwing from it writes nothing.
        #expect(try await kvod.update("visits", of: "acct", as: Int.self) { ($0 ?? 0) + 1 } == (1, 4))
        struct Refused: Error {}
        await #expect(throws: Refused.self) {
            try await kvod.update("visits", of: "acct", as: Int.self) { _ in throw Refused() }
        }
        #expect(try await kvod.get("visits", of: "acct", as: Int.self) == (1, 4))
        // The object deleted: not retried.
        try await kvod.delete("acct", if: [.exists])
        let gone = await kvodError { try await kvod.update("visits", of: "acct", as: Int.self) { ($0 ?? 0) + 1 } }
        expectEqual(gone?.code, .notFound)
    }
}
