import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Multi-index `remove` and `insert` on a large array through the real kvod over TCP (issue 10, item 5):
/// one pass over the array, not one pass per index. Removing 40,000 of 400,000 elements took 4.5 s in a
/// release build (63 s, and the insertion 87 s, in this debug build on a loaded machine); the 10 s bound is
/// generous for a shared machine.
@Suite struct ArrayOperationSizeOverTCPTests {
    static let length = 400_000
    static let chunk = 100_000

    /// A connection to a kvod holding `big.items` = [0, 1, ..., length - 1] (appended in chunks that fit a
    /// line).
    private func bigArray(_ server: KVODProcess) throws -> KVOConnection {
        let client = try server.connect()
        try client.call("create", ["object": "big", "values": ["items": []]])
        for start in stride(from: 0, to: Self.length, by: Self.chunk) {
            let values = (start..<(start + Self.chunk)).map { JSONValue.int(Int64($0)) }
            try client.call("insert", ["object": "big", "keyPath": "items", "values": .array(values)], timeout: 60)
        }
        return client
    }

    /// The `new` value of the next two events, by key path.
    private static func newValues(_ observer: KVOConnection) throws -> [String: JSONValue] {
        var news: [String: JSONValue] = [:]
        for _ in 0..<2 {
            let event = try #require(try observer.nextEvent(timeout: 60))
            news[event["keyPath"]?.stringValue ?? ""] = event["change"]?["new"]
        }
        return news
    }

    @Test("remove of 40,000 indexes from 400,000 elements, then insert of 40,000 at scattered indexes, each well under the old seconds")
    func manyIndexesInOnePass() throws {
        let server = try KVODProcess()
        let client = try bigArray(server)
        let observer = try server.connect()
        try observer.call("observe", ["object": "big", "keyPath": "items.@count", "options": ["new"]])
        // @sum keeps each element's contribution: its cache is edited with the array.
        try observer.call("observe", ["object": "big", "keyPath": "items.@sum", "options": ["new"]])
        let removed = stride(from: 0, to: Self.length, by: 10).map { $0 + 3 }  // 40,000 indexes: 3, 13, 23, ...

        var start = monotonicSeconds()
        try client.call("remove", ["object": "big", "keyPath": "items",
                                   "indexes": .array(removed.reversed().map { .int(Int64($0)) })], timeout: 120)
        let removeSeconds = monotonicSeconds() - start
        #expect(removeSeconds < 10, "remove took \(removeSeconds) s")
        var news = try Self.newValues(observer)
        expectEqual(news["items.@count"], .int(Int64(Self.length - removed.count)))
        let fullSum = Int64(Self.length) * Int64(Self.length - 1) / 2
        expectEqual(news["items.@sum"], .int(fullSum - removed.reduce(0) { $0 + Int64($1) }))

        // Spot checks: the element after each removed one moved down by one per removed index before it.
        var items = try #require(try client.call("get", ["object": "big", "keyPath": "items"], timeout: 60)["value"]?.arrayValue)
        expectEqual(items.count, Self.length - removed.count)
        expectEqual(items[0..<5], [0, 1, 2, 4, 5])
        expectEqual(items.last, .int(Int64(Self.length - 1)))
        #expect(!items.contains(.int(13)) && !items.contains(.int(399_993)))

        // Put them back where they were: insertion indexes refer to the resulting array.
        start = monotonicSeconds()
        try client.call("insert", ["object": "big", "keyPath": "items",
                                   "indexes": .array(removed.map { .int(Int64($0)) }),
                                   "values": .array(removed.map { .int(Int64($0)) })], timeout: 120)
        let insertSeconds = monotonicSeconds() - start
        #expect(insertSeconds < 10, "insert took \(insertSeconds) s")
        items = try #require(try client.call("get", ["object": "big", "keyPath": "items"], timeout: 60)["value"]?.arrayValue)
        expectEqual(items, (0..<Self.length).map { JSONValue.int(Int64($0)) })
        news = try Self.newValues(observer)
        expectEqual(news["items.@count"], .int(Int64(Self.length)))
        expectEqual(news["items.@sum"], .int(fullSum))
        expectEqual(try client.call("ping")["ok"], true)
    }
}
