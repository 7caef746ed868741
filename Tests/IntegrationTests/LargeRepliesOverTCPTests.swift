import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Replies that would not fit in a connection's output buffer (`--max-output-buffer`) are refused with
/// `too_large` before they are built, and `list` pages: against the real kvod over TCP (issue 10, item 8).
@Suite struct LargeRepliesOverTCPTests {
    private func errorCode(_ reply: JSONValue) -> String? {
        reply["error"]?["code"]?.stringValue
    }

    /// 256 KiB: the smallest output buffer used here. Objects may then hold at most (256 - 64) / 2 =
    /// 96 KiB (`--max-object-bytes`), so a reply over the buffer is built from several objects.
    private static let outputBuffer = "262144"

    @Test func aValueBiggerThanTheOutputBufferIsRefusedAndTheConnectionKeepsServing() throws {
        let server = try KVODProcess(["--max-output-buffer", Self.outputBuffer])
        let client = try server.connect()
        // Four objects of 90 KB each, reached through an array of references: `items.blob` is 360 KB.
        let big = String(repeating: "x", count: 90_000)
        for index in 0..<4 {
            try client.call("create", ["object": .string("part\(index)"), "values": ["blob": .string(big)]])
        }
        let references: JSONValue = .array((0..<4).map { ["$ref": .string("part\($0)")] })
        try client.call("create", ["object": "huge", "values": ["items": references, "small": 7]])

        let whole = try client.request("get", ["object": "huge", "keyPath": "items.blob"])
        expectEqual(errorCode(whole), "too_large", "\(whole)")
        expectEqual(whole["error"]?["message"]?.stringValue?.contains(Self.outputBuffer), true, "\(whole)")
        // The same connection keeps serving, what fits is answered.
        expectEqual(try client.call("get", ["object": "huge", "keyPath": "small"])["value"], 7)
        expectEqual(try client.call("get", ["object": "part0", "keyPath": "blob"])["value"], .string(big))
        expectEqual(try client.call("ping")["ok"], true)

        // observe with initial: refused, nothing subscribed; without initial it works.
        let observe = try client.request("observe", ["object": "huge", "keyPath": "items.blob", "options": ["initial", "new"]])
        expectEqual(errorCode(observe), "too_large", "\(observe)")
        expectEqual(try client.call("info", ["object": "huge"])["observers"], [])
        // Resuming from before a change would replay the 360 KB value: refused the same way.
        try client.call("set", ["object": "part0", "keyPath": "blob", "value": .string(big + "!")])
        let resume = try client.request("observe", ["object": "huge", "keyPath": "items.blob", "options": ["new"], "sinceRev": 1])
        expectEqual(errorCode(resume), "too_large", "\(resume)")
        expectEqual(try client.call("info", ["object": "huge"])["observers"], [])
        try client.call("observe", ["object": "huge", "keyPath": "small", "options": ["initial", "new"]])
        expectEqual(try client.nextEvent(timeout: 5)?["change"]?["new"], 7)
        expectEqual(server.log.contains("output buffer limit exceeded"), false, "\(server.log)")
    }

    @Test func classesInfoAndBindingsListingsOverTheBufferAreRefused() throws {
        let server = try KVODProcess(["--max-output-buffer", Self.outputBuffer])
        let client = try server.connect()
        // One class whose definition (an enum of 16,000 strings) is about 350 KB.
        let members = (0..<16000).map { JSONValue.string("value-\($0)-xxxxxxxx") }
        let definition: JSONValue = ["name": "Wide", "properties": ["v": ["type": "string", "enum": .array(members)]]]
        try client.call("defineClass", ["class": definition])
        expectEqual(errorCode(try client.request("classes")), "too_large")
        // 300 bindings whose convert expressions are 1,200 bytes each.
        try client.call("create", ["object": "a", "values": ["x": 1]])
        try client.call("create", ["object": "b", "values": ["y": 0]])
        let convert = "$value + " + Array(repeating: "1", count: 300).joined(separator: " + ")
        for _ in 0..<300 {
            try client.call("bind", ["from": ["object": "a", "keyPath": "x"], "to": ["object": "b", "keyPath": "y"],
                                     "convert": .string(convert)])
        }
        expectEqual(errorCode(try client.request("bindings")), "too_large")
        // 4,000 observers of one object listed by info: about 320 KB.
        for _ in 0..<4000 { try client.call("observe", ["object": "a", "keyPath": "some.long.key.path.to.watch"]) }
        expectEqual(errorCode(try client.request("info", ["object": "a"])), "too_large")
        expectEqual(try client.call("ping")["ok"], true)
        #expect(!server.log.contains("output buffer limit exceeded"))
    }

    @Test func listPagesReturnEveryIdExactlyOnceInOrder() throws {
        let server = try KVODProcess(["--max-output-buffer", Self.outputBuffer])
        let client = try server.connect()
        // 300 ids of about 1000 bytes: 300 KB of ids, over the 256 KiB output buffer.
        let padding = String(repeating: "p", count: 990)
        var expected: [String] = []
        for index in 0..<300 {
            let id = String(format: "%04d", (index * 7919) % 300) + "-\n\u{1B}" + padding
            expected.append(id)
            try client.call("create", ["object": .string(id)])
        }
        expected.sort()

        // The whole list does not fit: too_large, with a hint, and the connection keeps serving.
        let whole = try client.request("list")
        expectEqual(errorCode(whole), "too_large", "\(whole)")
        expectEqual(try client.call("ping")["ok"], true)

        // Paging: each page at most `limit` ids, cut short where the output buffer would overflow.
        for limit in [7, 100, 1000] {
            var seen: [String] = []
            var after: String?
            var pages = 0
            while true {
                var params: [String: JSONValue] = ["limit": .int(Int64(limit))]
                if let after { params["after"] = .string(after) }
                let reply = try client.call("list", params)
                let ids = try #require(reply["objects"]?.arrayValue).compactMap(\.stringValue)
                #expect(ids.count <= limit && !ids.isEmpty)
                seen += ids
                pages += 1
                guard try #require(reply["more"]?.boolValue) else { break }
                after = ids.last
            }
            expectEqual(seen, expected, "limit \(limit): \(seen.count) ids in \(pages) pages")
        }
        // `after` need not be an existing id; past the end there is nothing more.
        let tail = try client.call("list", ["limit": 5, "after": .string(expected[297])])
        expectEqual(tail["objects"], .array(expected[298...].map(JSONValue.string)))
        expectEqual(tail["more"], false)
        let small = try server.connect()
        try small.call("create", ["object": "zzz"])
        expectEqual(try small.call("list", ["after": "zz"])["objects"], ["zzz"])
        expectEqual(try small.call("list", ["after": "zzz"]) ["objects"], [])
        expectEqual(errorCode(try small.request("list", ["limit": 0])), "bad_request")
    }

    @Test func kvoclientListPagesThroughEveryObject() throws {
        let server = try KVODProcess(["--max-output-buffer", Self.outputBuffer])
        let client = try server.connect()
        let padding = String(repeating: "q", count: 990)
        var expected: [String] = []
        for index in 0..<300 {
            let id = String(format: "%03d", index) + padding
            expected.append(id)
            try client.call("create", ["object": .string(id)])
        }
        let all = try KVOClientProcess.run(server, ["list"])
        expectEqual(all.status, 0, "\(all.stderr)")
        expectEqual(all.lines, expected)
        let page = try KVOClientProcess.run(server, ["list", "--limit", "3", "--after", expected[10]])
        expectEqual(page.status, 0, "\(page.stderr)")
        expectEqual(page.lines, Array(expected[11...13]))
        let rest = try KVOClientProcess.run(server, ["list", "--after", expected[150], "--page-size", "7"])
        expectEqual(rest.lines, Array(expected[151...]))
    }
}
