import Foundation
import KVOClient
import KVOWireProbe
import Testing

@testable import KVOTestSupport

/// What `kvoclient subscribe` needs from KVOClient beyond typed changes, against the real kvod over TCP:
/// each change's raw `change` dictionary and reason name (for `--json` and the event line), a `sub` that
/// stays the first connection's across reconnections although the server renumbers, the `rev` an
/// observation made by `subscribe` starts from, and `liveObservationCount` telling, once a request sent
/// after a reconnection is answered, whether a resubscription was refused.
@Suite(.timeLimit(.minutes(1))) struct KVOClientEventDetailsTests {
    @Test("a change carries the event's change dictionary, its reason's wire name and the server's sub; subscribe reports its starting rev")
    func rawChangeSubAndStartingRevision() async throws {
        let server = try KVODProcess()
        let writer = try server.connect()
        _ = try writer.call("create", ["object": "doc", "values": ["items": ["a"], "title": "t"]])
        _ = try writer.call("set", ["object": "doc", "keyPath": "title", "value": "u"])
        let kvod = try await server.client()
        let observation = try await kvod.subscribe("items", of: "doc", options: [.new, .old, .prior])
        expectEqual(observation.subscribedRevision, 2)
        expectEqual(kvod.observe("items", of: "doc").subscribedRevision, nil)
        // A raw observer of the same key path sees the events as the server sends them.
        let raw = try server.connect()
        try raw.observe(object: "doc", keyPath: "items", options: ["new", "old", "prior"])
        let observers = try await eventuallyObservers(writer, "doc", count: 2)
        expectEqual(observers, 2)
        let subs = try writer.call("info", ["object": "doc"])["observers"]?.arrayValue?.compactMap { $0["sub"]?.intValue } ?? []
        _ = try writer.call("replace", ["object": "doc", "keyPath": "items", "indexes": [0], "values": ["b"]])
        var iterator = observation.makeAsyncIterator()
        for _ in 0..<2 {
            let change = try #require(try await iterator.next())
            let event = try #require(try raw.nextEvent())
            expectEqual(change.rawChange, event["change"])
            expectEqual(change.reason.wireName, event["reason"]?.stringValue)
            expectEqual(change.sub.map { subs.contains($0) }, true)
            #expect(change.sub != event["sub"]?.intValue)
        }
        expectEqual(ChangeReason.other("later").wireName, "later")
        kvod.close()
    }

    @Test("sub stays the first connection's across a kvod restart that renumbers subscriptions")
    func subIsStableAcrossReconnection() async throws {
        let directory = try TemporaryDirectory("client-stable-sub")
        let server = try KVODProcess(dataDirectory: directory.appending("data"))
        let early = try server.connect()
        _ = try early.call("create", ["object": "o", "values": ["n": 0]])
        // Two observations before the client's on the first server, none after the restart: the client's
        // resubscription cannot get the number it had.
        try early.observe(object: "o", keyPath: "n")
        try early.observe(object: "o", keyPath: "n")
        let kvod = try await KVOClient.connect(to: server.clientConfiguration())
        let observation = try await kvod.subscribe("n", of: "o", as: Int.self)
        var iterator = observation.makeAsyncIterator()
        _ = try server.connect().call("set", ["object": "o", "keyPath": "n", "value": 1])
        let first = try #require(try await iterator.next())
        let restarted = try server.restart(after: SIGKILL)
        let other = try restarted.connect()
        _ = try await eventuallyObservers(other, "o", count: 1)
        let subs = try other.call("info", ["object": "o"])["observers"]?.arrayValue?.compactMap { $0["sub"]?.intValue } ?? []
        let firstSub = try #require(first.sub)
        #expect(subs.count == 1 && !subs.contains(firstSub), "the scenario must renumber: \(subs)")
        _ = try other.call("set", ["object": "o", "keyPath": "n", "value": 2])
        let second = try #require(try await iterator.next())
        expectEqual(second.new, 2)
        expectEqual(second.sub, first.sub)
        kvod.close()
    }

    @Test("after a reconnection, liveObservationCount shows a refused resubscription once a later request is answered")
    func liveObservationCountAfterRefusedResubscription() async throws {
        let server = try KVODProcess()
        _ = try server.connect().call("create", ["object": "a", "values": ["n": 0]])
        let kvod = try await KVOClient.connect(to: server.clientConfiguration())
        let observation = try await kvod.subscribe("n", of: "a")
        expectEqual(kvod.liveObservationCount, 1)
        let states = kvod.states
        // An --in-memory kvod restarts empty: the resubscription gets not_found.
        let restarted = try server.restart(after: SIGTERM)
        var sawDisconnection = false
        for await state in states {
            if case .disconnected = state { sawDisconnection = true }
            if state == .connected && sawDisconnection { break }
        }
        try await kvod.ping()
        expectEqual(kvod.liveObservationCount, 0)
        var iterator = observation.makeAsyncIterator()
        let error = await kvodError { _ = try await iterator.next() }
        expectEqual(error?.code, .notFound)
        _ = restarted
        kvod.close()
    }
}
