import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// `list` pages come from an index kept sorted as objects come and go, not from a sort of every id
/// per request: against the real kvod over TCP (issue 10, `list` paging as an amplification vector).
@Suite struct ListPagingOverTCPTests {
    /// Sends every request of `requests` before reading any reply (pipelined), in batches, and
    /// returns the replies in order; each must be `ok`.
    @discardableResult
    private func pipeline(_ client: KVOConnection, _ requests: [JSONValue], batch: Int = 1000) throws -> [JSONValue] {
        var replies: [JSONValue] = []
        var start = 0
        while start < requests.count {
            let end = min(requests.count, start + batch)
            var bytes: [UInt8] = []
            for request in requests[start..<end] {
                bytes += Array(request.description.utf8)
                bytes.append(UInt8(ascii: "\n"))
            }
            try client.send(raw: bytes)
            for _ in start..<end {
                let reply = try client.readMessage(timeout: 60)
                guard reply["ok"] == true else { throw KVOClientError.malformedMessage("refused: \(reply)") }
                replies.append(reply)
            }
            start = end
        }
        return replies
    }

    private func create(_ id: String) -> JSONValue {
        .object(["op": "create", "object": .string(id), "values": [:]])
    }

    /// Pages through the objects while others create and delete them between pages: every id present
    /// throughout comes back exactly once, the whole walk is in strictly increasing order, and nothing
    /// that never existed appears. Then again after a restart (the index rebuilt from disk).
    @Test func pagingWhileObjectsComeAndGoReturnsEveryLastingIdOnceInOrder() throws {
        let directory = try TemporaryDirectory("list-paging")
        var server = try KVODProcess(dataDirectory: directory.appending("data"))
        defer { _ = server.stop() }
        var random = SystemRandomNumberGenerator()
        var lasting: [String] = []
        var volatile: [String] = []
        for index in 0..<3000 {
            let id: String
            switch index % 5 {
            case 0: id = String(format: "id-%05d", (index * 7919) % 3000)
            case 1: id = "ü-\(index)"
            case 2: id = String(repeating: "prefix/", count: 6) + "\(index)"
            case 3: id = "🙂\(index)"
            default: id = "e\u{301}\(index)"
            }
            if index % 3 == 0 { volatile.append(id) } else { lasting.append(id) }
        }
        let client = try server.connect()
        try pipeline(client, (lasting + volatile).shuffled().map(create))
        var everExisting = Set(lasting + volatile)
        var created = 0

        let writer = try server.connect()
        for limit in [1, 29, 500] {
            var seen: [String] = []
            var after: String?
            while true {
                var params: [String: JSONValue] = ["limit": .int(Int64(limit))]
                if let after { params["after"] = .string(after) }
                let reply = try client.call("list", params)
                let ids = try #require(reply["objects"]?.arrayValue).compactMap(\.stringValue)
                seen += ids
                guard try #require(reply["more"]?.boolValue) else { break }
                after = try #require(ids.last)
                guard seen.count % 7 == 0 || limit > 1 else { continue }
                // Between pages: delete a few volatile objects and create new ones on both sides of
                // the cursor (some before it, which this walk must not see, some after).
                var changes: [JSONValue] = []
                for _ in 0..<3 where !volatile.isEmpty {
                    let id = volatile.remove(at: Int.random(in: 0..<volatile.count, using: &random))
                    changes.append(["op": "delete", "object": .string(id)])
                }
                for _ in 0..<3 {
                    created += 1
                    let id = ["id-", "ü-", "🙂", "a", "zz"].randomElement(using: &random)! + "new-\(created)"
                    everExisting.insert(id)
                    volatile.append(id)
                    changes.append(create(id))
                }
                try pipeline(writer, changes)
            }
            #expect(zip(seen, seen.dropFirst()).allSatisfy { $0 < $1 }, "limit \(limit): not strictly increasing")
            let seenSet = Set(seen)
            expectEqual(seenSet.count, seen.count, "limit \(limit): an id came back twice")
            #expect(lasting.filter { !seenSet.contains($0) }.isEmpty, "limit \(limit): a lasting id was skipped")
            #expect(seenSet.isSubset(of: everExisting), "limit \(limit): an id that never existed")
        }

        // After a restart the index is rebuilt from the stored objects: the same ids, in order.
        let before = try client.call("list")["objects"]
        server = try server.restart()
        let after = try server.connect().call("list")["objects"]
        expectEqual(after, before)
        let expected = Set(lasting + volatile).sorted()
        expectEqual(after, .array(expected.map(JSONValue.string)))
    }

    /// One page used to sort every id: 2,000 pipelined `list` requests with `limit` 1 at 50,000
    /// objects took minutes; now each costs a binary search. The bound is generous.
    @Test func onePageDoesNotCostASortOfEveryObject() throws {
        let server = try KVODProcess()
        defer { _ = server.stop() }
        let client = try server.connect()
        try pipeline(client, (0..<50_000).map { create(String(format: "object-%06d", ($0 * 7919) % 50_000)) })
        let started = Date()
        let pages = try pipeline(client, (0..<2000).map { index -> JSONValue in
            ["op": "list", "limit": 1, "after": .string(String(format: "object-%06d", (index * 104_729) % 50_000))]
        }, batch: 500)
        let elapsed = Date().timeIntervalSince(started)
        #expect(elapsed < 20, "2,000 pages took \(elapsed) s")
        expectEqual(pages[1]["objects"], .array([.string(String(format: "object-%06d", 104_729 % 50_000 + 1))]))
        expectEqual(pages.last?["more"], true)
    }
}
