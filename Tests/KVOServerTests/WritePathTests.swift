import KVOJSON
import Testing

@testable import KVOServer

/// The write path's one door (`Server.applyWrite`) and the write's modifiers as one value (`WriteModifiers`):
/// whatever path brings a write to the engine (a live request, a batch's part, a session's `onDisconnect` action),
/// its conditions are checked and its ttl set in its turn, and the server's own writes (the `expire` at the
/// deadline, an ended session's ephemeral deletions) go through the same door. In-process, on a manual clock.
@Suite struct WritePathTests {
    /// The ways a client's write reaches the engine on a single node.
    enum Path: String, CaseIterable, CustomStringConvertible {
        case live, batchPart, sessionAction
        var description: String { rawValue }
    }

    /// Sends the writes `lines` (request objects without `id`) along `path` from `client`; a session's actions run
    /// when it ends (`endSession`), in the order they were registered.
    private func write(_ lines: [String], along path: Path, from client: EmbeddedConnection) throws {
        switch path {
        case .live:
            for line in lines { try client.call(line) }
        case .batchPart:
            // One batch per write, so that a refused part undoes only itself.
            for line in lines { try client.call(#"{"op":"batch","ops":[\#(line)]}"#) }
        case .sessionAction:
            try #require(try client.call(#"{"op":"session","grace":1}"#)["session"] != nil)
            for line in lines { try #require(try client.call(#"{"op":"onDisconnect","request":\#(line)}"#)["action"] != nil) }
            try client.call(#"{"op":"endSession"}"#)
        }
    }

    @Test("a write's conditions and ttl take effect in its turn whatever path brings it, and its deadline is kept by the server's own expire",
          arguments: Path.allCases)
    func modifiersApplyOnEveryPath(path: Path) throws {
        let clock = ServerClock.manual()
        let server = try EmbeddedServer.make(clock: clock)
        let client = server.makeEmbeddedConnection()
        try client.call(#"{"op":"create","object":"o","values":{"n":1}}"#)
        try write([
            // Refused by its condition: `m` must never appear.
            #"{"op":"set","object":"o","keyPath":"m","value":2,"ifEquals":{"keyPath":"n","value":99},"ttl":60}"#,
            // Applied: the condition holds, and the object gets a ttl of 2 s.
            #"{"op":"set","object":"o","keyPath":"n","value":3,"ifEquals":{"keyPath":"n","value":1},"ttl":2}"#,
        ], along: path, from: client)
        let object = try client.call(#"{"op":"get","object":"o"}"#)
        expectEqual(object["value"], ["n": 3], "\(path): \(object)")
        expectEqual(object["expiresAt"], .int(clock.wallMilliseconds + 2_000), "\(path): the applied write's ttl, not the refused one's: \(object)")
        server.advanceTime(by: 1.999)
        expectEqual(try client.call(#"{"op":"get","object":"o","keyPath":"n"}"#)["value"], 3)
        server.advanceTime(by: 0.001)
        expectEqual(try client.call(#"{"op":"get","object":"o"}"#)["error"]?["code"], "not_found", "\(path): expired at its deadline")
        #expect(server.stopEmbedded().loopClosedCleanly)
    }

    @Test("an ephemeral create with a condition and a ttl: all three in one turn; the refused one joins no session, the created one goes when its session ends")
    func ephemeralWithConditionAndTTL() throws {
        let clock = ServerClock.manual()
        let server = try EmbeddedServer.make(clock: clock)
        let owner = server.makeEmbeddedConnection()
        let other = server.makeEmbeddedConnection()
        try #require(try owner.call(#"{"op":"session","grace":1}"#)["session"] != nil)
        try #require(try other.call(#"{"op":"session","grace":1}"#)["session"] != nil)
        let create = #"{"op":"create","object":"cursor","values":{"x":1},"ephemeral":true,"ttl":60,"ifAbsent":true}"#
        #expect(try owner.call(create)["rev"] != nil)
        let refused = try other.call(create)
        expectEqual(refused["error"]?["code"], "conflict", "\(refused)")
        expectEqual(try owner.call(#"{"op":"get","object":"cursor"}"#)["expiresAt"], .int(clock.wallMilliseconds + 60_000))
        // The other session ends: the object is not its own, and stays.
        try other.call(#"{"op":"endSession"}"#)
        expectEqual(try owner.call(#"{"op":"get","object":"cursor","keyPath":"x"}"#)["value"], 1)
        // Its creator's session ends: the server deletes it, through the same door.
        try owner.call(#"{"op":"endSession"}"#)
        expectEqual(try owner.call(#"{"op":"get","object":"cursor"}"#)["error"]?["code"], "not_found")
        #expect(server.stopEmbedded().loopClosedCleanly)
    }
}
