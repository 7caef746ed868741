import Foundation
import KVOClient
import KVOWireProbe
import Testing

@testable import KVOTestSupport

/// KVOClient's expiry (docs/protocol.md, "Expiry") against the real kvod: `create`/`set` with a `Duration`
/// ttl, `touch`, a ttl in a batch, and `Change.cause` `"expired"` on the ending, in both event encodings. A 6-minute
/// hang guard, as `KVOClientBufferingTests`: beside the full run the cooperative threads can be held for a minute.
@Suite(.timeLimit(.minutes(6))) struct KVOClientExpiryTests {
    @Test(arguments: [true, false])
    func aSessionExpiresAndItsObserverIsToldWhy(compact: Bool) async throws {
        let server = try KVODProcess()
        var configuration = server.clientConfiguration()
        configuration.compactEvents = compact
        let kvod = try await KVOClient.connect(to: configuration)
        // Observed before it exists (a pattern), so that a slow machine cannot let it expire unobserved.
        let observation = try await kvod.subscribe(pattern: "sess:*", keyPath: "user", options: [.new, .old])
        // Nothing is asked of the short-lived object after its creation: on a loaded machine it may be gone.
        try await kvod.create("sess:long", values: ["user": "bob"] as JSONValue, ttl: .seconds(3600))
        #expect(try await kvod.touch("sess:long").expiresAt != nil)
        try await kvod.create("sess:1", values: ["user": "ada"] as JSONValue, ttl: .seconds(1))
        try await kvod.create("plain", values: [:] as JSONValue)
        expectEqual(try await kvod.touch("plain").expiresAt, nil)
        try await kvod.batch([.set("n", of: "plain", to: 1, ttl: .seconds(3600))])
        #expect(try await kvod.touch("plain").expiresAt != nil)
        var ending: Change<JSONValue>?
        for try await change in observation where change.reason == .sourceDeleted {
            ending = change
            break
        }
        #expect(ending?.object == "sess:1" && ending?.cause == "expired" && ending?.old == "ada", "\(String(describing: ending))")
        kvod.close()
    }
}
