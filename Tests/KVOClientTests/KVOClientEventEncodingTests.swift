import Foundation
import KVOClient
import Testing

@testable import KVOTestSupport

/// KVOClient reads both event encodings (docs/protocol.md, "Events" and "Compact events") into the same
/// changes: every reason (initial, valueChanged, pathChanged, sourceDeleted), every kind, prior
/// notifications, old and new, and a `sinceRev` replay, observed at once by a client asking for compact
/// events (the default) and one asking for the full encoding, against the real kvod. Through a proxy
/// that counts kvod's bytes, the compact client is shown to receive the compact form.
@Suite(.timeLimit(.minutes(1))) struct KVOClientEventEncodingTests {
    /// Writes that produce every reason and kind on `list items` and `list ref.name` (through a reference).
    private static func writeEverything(_ kvod: KVOClient) async throws {
        _ = try await kvod.set("items", of: "list", to: ["a", "b"] as JSONValue)
        _ = try await kvod.insert("items", of: "list", values: ["c"], at: 1)
        _ = try await kvod.replace("items", of: "list", indexes: [0], with: ["A"])
        _ = try await kvod.remove("items", of: "list", indexes: [2])
        _ = try await kvod.create("target", values: ["name": "T"] as JSONValue)
        _ = try await kvod.set("ref", of: "list", to: ["$ref": "target"] as JSONValue)
        _ = try await kvod.set("name", of: "target", to: "U")
        _ = try await kvod.delete("list")
    }

    /// Observes `keyPath` of `list` with every option until the observation ends (sourceDeleted).
    private static func collect(_ kvod: KVOClient, _ keyPath: String, sinceRev: Int64? = nil) async throws -> [Change<JSONValue>] {
        var changes: [Change<JSONValue>] = []
        let options: ObservationOptions = sinceRev == nil ? [.initial, .new, .old, .prior] : [.new, .old, .prior]
        let observation = try await kvod.subscribe(keyPath, of: "list", options: options, sinceRev: sinceRev)
        for try await change in observation { changes.append(change) }
        return changes
    }

    @Test("compact and full events give identical changes for every reason and kind, live and replayed")
    func bothEncodingsGiveTheSameChanges() async throws {
        let server = try KVODProcess()
        var fullConfiguration = server.clientConfiguration()
        fullConfiguration.compactEvents = false
        let compact = try await server.client()
        let full = try await KVOClient.connect(to: fullConfiguration)
        defer { compact.close(); full.close() }
        let start = try await compact.create("list", values: ["items": [] as JSONValue] as JSONValue)

        async let compactItems = Self.collect(compact, "items")
        async let fullItems = Self.collect(full, "items")
        async let compactName = Self.collect(compact, "ref.name")
        async let fullName = Self.collect(full, "ref.name")
        let writer = try await KVOClient.connect(to: server.clientConfiguration())
        defer { writer.close() }
        while try await writer.info("list").count < 4 { try await Task.sleep(nanoseconds: 10_000_000) }
        try await Self.writeEverything(writer)
        let (items, itemsFull, name, nameFull) = try await (compactItems, fullItems, compactName, fullName)

        for (got, expected) in [(items, itemsFull), (name, nameFull)] {
            expectEqual(got, expected)
            expectEqual(got.map(\.rawChange), expected.map(\.rawChange))
        }
        expectEqual(Set(items.map(\.kind)), [.setting, .insertion, .replacement, .removal])
        #expect(items.contains { $0.isPrior } && items.first?.reason == .initial && items.last?.reason == .sourceDeleted)
        #expect(name.contains { $0.reason == .pathChanged })

        // The same history replayed with sinceRev (the object is gone: replay ends with sourceDeleted).
        let replayed = try await Self.collect(compact, "items", sinceRev: start)
        var fullReplayClient = fullConfiguration
        fullReplayClient.clientName = "replay"
        let replayClient = try await KVOClient.connect(to: fullReplayClient)
        defer { replayClient.close() }
        let replayedFull = try await Self.collect(replayClient, "items", sinceRev: start)
        #expect(replayed == replayedFull && replayed.map(\.rawChange) == replayedFull.map(\.rawChange))
        expectEqual(replayed, Array(items.dropFirst()))
    }

    @Test("a compact client receives the compact form: far fewer bytes from kvod for the same changes")
    func compactEventsAreSmallerOnTheWire() async throws {
        let server = try KVODProcess()
        let writer = try await server.client()
        defer { writer.close() }
        _ = try await writer.create("counter", values: ["n": 0] as JSONValue)
        var received: [Bool: Int] = [:]
        for compactEvents in [true, false] {
            let proxy = try TCPProxy(targetPort: server.port)
            var configuration = server.clientConfiguration()
            configuration.port = proxy.port
            configuration.compactEvents = compactEvents
            let reader = try await KVOClient.connect(to: configuration)
            let observation = try await reader.subscribe("n", of: "counter", options: [.new])
            let before = proxy.bytesFromServer
            var iterator = observation.makeAsyncIterator()
            for value in 1...200 { _ = try await writer.set("n", of: "counter", to: value) }
            for _ in 1...200 { _ = try await iterator.next() }
            received[compactEvents] = proxy.bytesFromServer - before
            reader.close()
        }
        // Full events repeat "event", "object", "keyPath", "reason" and the change dictionary's names:
        // about 90 bytes more each (docs/protocol.md's overhead table).
        let compactBytes = try #require(received[true]), fullBytes = try #require(received[false])
        #expect(fullBytes - compactBytes >= 200 * 80, "compact \(compactBytes) bytes, full \(fullBytes)")
    }

    @Test("compact reason codes, prior codes and kind members decode; an unknown code is the reason as sent, not an error")
    func compactCodesAndUnknownCodes() async throws {
        let events = [
            #"{"s":1,"r":2,"w":"z","n":1}"#,
            #"{"s":1,"r":3,"p":"q","o":1}"#,
            #"{"s":1,"r":4,"w":"p","n":2,"o":1}"#,
            #"{"s":1,"r":5,"p":1,"4":[0],"o":[2]}"#,
            #"{"s":1,"r":5,"4":[0],"n":[3],"o":[2]}"#,
            #"{"s":1,"r":6,"2":[1,3],"n":[4,5]}"#,
            #"{"s":1,"r":7,"w":"r","n":5}"#,
            #"{"s":1,"r":8,"w":"pathChanged","n":6,"o":5}"#,
            #"{"s":1,"r":9,"p":"s","o":6}"#,
            #"{"s":1,"r":9,"w":"s","n":null,"o":6}"#,
        ]
        let server = try ScriptedKVOD(events: events)
        let kvod = try await KVOClient.connect(to: KVOClient.Configuration(host: "127.0.0.1", port: server.port,
                                                                           clientName: "tests", reconnection: nil))
        defer { kvod.close() }
        var changes: [Change<JSONValue>] = []
        for try await change in try await kvod.subscribe("v", of: "o", options: [.new, .old, .prior]) { changes.append(change) }
        let summary = changes.map { "\($0.reason.wireName) \($0.kind.rawValue) \($0.isPrior ? "prior " : "")\($0.indexes)" }
        #expect(summary == [
            "z 1 []", "q 1 prior []", "pathChanged 1 []", "valueChanged 4 prior [0]", "valueChanged 4 [0]",
            "valueChanged 2 [1, 3]", "resync 1 []", "pathChanged 1 []", "sourceDeleted 1 prior []", "sourceDeleted 1 []",
        ])
        #expect(changes.first?.reason == .other("z") && changes.first?.new == 1 && changes.first?.decodingError == nil)
        #expect(changes[5].new == [4, 5] && changes[4].old == [2] && changes.last?.old == 6)
    }
}
