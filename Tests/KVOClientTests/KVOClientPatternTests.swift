import Foundation
import KVOClient
import KVOWireProbe
import Testing

@testable import KVOTestSupport

/// KVOClient's pattern observations against the real kvod over TCP: `observe(pattern:keyPath:options:)`
/// and `subscribe(pattern:…)` deliver changes that each name their object, in the compact encoding (the
/// client's default) and the full one; a `sourceDeleted` does not end them; `sinceRev` resumes them.
@Suite(.timeLimit(.minutes(1))) struct KVOClientPatternTests {
    private struct Seen: Equatable, CustomStringConvertible {
        let reason: String
        let object: String
        let new: JSONValue?
        var description: String { "\(reason) \(object) \(new.map { "\($0)" } ?? "-")" }
    }

    private func seen(_ change: Change<JSONValue>) -> Seen {
        Seen(reason: change.reason.wireName, object: change.object, new: change.new)
    }

    @Test(arguments: [true, false])
    func keyPathOnEveryMatchingObjectNamesEachObject(compact: Bool) async throws {
        let server = try KVODProcess()
        var configuration = server.clientConfiguration()
        configuration.compactEvents = compact
        let kvod = try await KVOClient.connect(to: configuration)
        try await kvod.create("user:1", values: ["address": ["city": "London"]] as JSONValue)
        let observation = try await kvod.subscribe(pattern: "user:*", keyPath: "address.city",
                                                   options: [.initial, .new, .old], as: JSONValue.self)
        try await kvod.create("order:1", values: ["address": ["city": "Rome"]] as JSONValue)
        try await kvod.create("user:2", values: ["address": ["city": "Oslo"]] as JSONValue)
        try await kvod.set("address.city", of: "user:1", to: "Paris")
        try await kvod.delete("user:1")
        try await kvod.set("address.city", of: "user:2", to: "Bergen")
        var changes: [Change<JSONValue>] = []
        for try await change in observation {
            changes.append(change)
            if changes.count == 5 { break }
        }
        #expect(changes.map(seen).map(\.description) == [
            "initial user:1 \"London\"", "created user:2 \"Oslo\"", "valueChanged user:1 \"Paris\"",
            "sourceDeleted user:1 null", "valueChanged user:2 \"Bergen\"",
        ])
        #expect(changes.allSatisfy { $0.keyPath == "address.city" })
        expectEqual(changes[2].old, "London")
    }

    @Test func idSetWithInitialIds() async throws {
        let server = try KVODProcess()
        let kvod = try await server.client()
        for id in ["job-b", "job-a", "other"] { try await kvod.create(id, values: [:] as JSONValue) }
        var iterator = kvod.observe(pattern: "job-*", options: [.initial]).makeAsyncIterator()
        let initial = try #require(try await iterator.next())
        expectEqual(initial.reason, .initial)
        expectEqual(initial.new, ["job-a", "job-b"])
        try await kvod.delete("job-a")
        try await kvod.create("job-c", values: [:] as JSONValue)
        let deleted = try #require(try await iterator.next())
        let created = try #require(try await iterator.next())
        expectEqual(seen(deleted).description, "sourceDeleted job-a -")
        expectEqual(seen(created).description, "created job-c -")
        expectEqual(kvod.liveObservationCount, 1, "a deletion does not end a pattern observation")
    }

    @Test func resumesFromARevision() async throws {
        let server = try KVODProcess()
        let kvod = try await server.client()
        try await kvod.create("s-1", values: ["v": 0] as JSONValue)
        let since = try await kvod.set("v", of: "s-1", to: 1)
        try await kvod.create("s-2", values: ["v": 5] as JSONValue)
        try await kvod.set("v", of: "s-1", to: 2)
        let observation = try await kvod.subscribe(pattern: "s-*", keyPath: "v", options: [.new], sinceRev: since)
        var changes: [Change<JSONValue>] = []
        for try await change in observation {
            changes.append(change)
            if changes.count == 2 { break }
        }
        expectEqual(changes.map(seen).map(\.description), ["created s-2 5", "valueChanged s-1 2"])
    }

    @Test func malformedPatternIsThrownBySubscribe() async throws {
        let server = try KVODProcess()
        let kvod = try await server.client()
        let error = await kvodError { _ = try await kvod.subscribe(pattern: "") }
        expectEqual(error?.code, .badRequest, "\(String(describing: error))")
        try await kvod.ping()
    }

    @Test(arguments: [true, false])
    func liveQueryEntersAndLeavesWithTypedValues(compact: Bool) async throws {
        let server = try KVODProcess()
        var configuration = server.clientConfiguration()
        configuration.compactEvents = compact
        let kvod = try await KVOClient.connect(to: configuration)
        try await kvod.create("order:1", values: ["status": "open", "total": 150] as JSONValue)
        try await kvod.create("order:2", values: ["status": "open", "total": 50] as JSONValue)
        let totals = try await kvod.subscribe(pattern: "order:*", keyPath: "total",
                                              where: "status == 'open' && total > 100",
                                              options: [.initial, .new, .old], as: Int.self)
        try await kvod.set("total", of: "order:2", to: 120)
        try await kvod.set("status", of: "order:1", to: "closed")
        try await kvod.delete("order:2")
        var changes: [String] = []
        for try await change in totals {
            changes.append("\(change.reason.wireName) \(change.object) \(change.old.map(String.init) ?? "-") \(change.new.map(String.init) ?? "-")")
            if changes.count == 4 { break }
        }
        expectEqual(changes, ["initial order:1 - 150", "entered order:2 - 120", "left order:1 150 -", "left order:2 120 -"])
    }

    @Test func malformedFilterIsThrownBySubscribe() async throws {
        let server = try KVODProcess()
        let kvod = try await server.client()
        let error = await kvodError { _ = try await kvod.subscribe(pattern: "x:*", where: "a ==") }
        expectEqual(error?.code, .invalidExpression, "\(String(describing: error))")
        expectEqual(kvod.liveObservationCount, 0)
        try await kvod.ping()
    }
}
