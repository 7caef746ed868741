import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Expression amplification through the real kvod over TCP (issue 10, item 4): computed properties that
/// multiply a string (`c1 = s+s+…` 512 times, `c2 = c1+c1+…`, `len(c2)`) and a chain of bindings that each
/// multiply their input. Every built value is bounded (1 MiB), every evaluation's work too; the outcome
/// is `null` for a computed property and a `too_large` refusal for a binding's write; kvod answers
/// promptly, stays small and keeps serving. (Before: 32.6 s and a 309 MB peak; a 100-byte set stored 26 MB.)
@Suite struct ExpressionLimitsOverTCPTests {
    /// `term + term + …` with `count` terms.
    private static func repeated(_ term: String, _ count: Int) -> String {
        Array(repeating: term, count: count).joined(separator: " + ")
    }

    /// kvod's resident set size in bytes, from /proc.
    private static func residentBytes(_ server: KVODProcess) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(server.process.processIdentifier)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kilobytes = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        else { return 0 }
        return kilobytes * 1024
    }

    @Test("c1 = s+s+… (512), c2 = c1+c1+… (512), n = len(c2): c2 and n read null at once; kvod keeps serving")
    func computedAmplification() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        let other = try server.connect()
        try client.call("defineClass", ["class": [
            "name": "A", "properties": ["s": ["type": "string"]],
            "computed": ["c1": .string(Self.repeated("s", 512)), "c2": .string(Self.repeated("c1", 512)),
                         "n": "len(c2)", "n1": "len(c1)"],
        ]])
        try client.call("create", ["object": "a", "class": "A", "values": ["s": .string(String(repeating: "x", count: 500))]])
        let observer = try server.connect()
        try observer.call("observe", ["object": "a", "keyPath": "n", "options": ["new"]])
        try observer.call("observe", ["object": "a", "keyPath": "n1", "options": ["new"]])

        let start = monotonicSeconds()
        try client.send(["op": "set", "id": 5, "object": "a", "keyPath": "s", "value": .string(String(repeating: "y", count: 500))])
        expectEqual(try other.request("ping", timeout: 30)["ok"], true, "another connection is served meanwhile")
        expectEqual(try client.readMessage(timeout: 60)["ok"], true)
        #expect(try client.call("get", ["object": "a", "keyPath": "n"], timeout: 60)["value"] == .null,
                "c2 would be 131 MB: over the size limit, it reads null, and so does len(c2)")
        expectEqual(try client.call("get", ["object": "a", "keyPath": "c2"], timeout: 60)["value"], .null)
        // c1 is 256,000 bytes: within the limit, and its length is right.
        expectEqual(try client.call("get", ["object": "a", "keyPath": "n1"], timeout: 60)["value"], 256_000)
        let seconds = monotonicSeconds() - start
        #expect(seconds < 10, "took \(seconds) s (was 32.6 s)")
        #expect(Self.residentBytes(server) < 150 << 20, "RSS \(Self.residentBytes(server) >> 20) MB (peaked at 309 MB)")
        expectEqual(try client.call("ping")["ok"], true)
    }

    @Test("a chain of bindings each converting $0+$0+…: the write that would be too large is refused as too_large, reported to the creator")
    func bindingChainAmplification() throws {
        let server = try KVODProcess()
        let creator = try server.connect()
        for object in ["a", "b", "c", "d"] { try creator.call("create", ["object": .string(object), "values": ["v": ""]]) }
        let convert = JSONValue.string(Self.repeated("$0", 64))
        var ids: [JSONValue] = []
        for (from, to) in [("a", "b"), ("b", "c"), ("c", "d")] {
            let reply = try creator.call("bind", ["from": ["object": .string(from), "keyPath": "v"],
                                                  "to": ["object": .string(to), "keyPath": "v"], "convert": convert])
            ids.append(reply["binding"] ?? .null)
        }
        let start = monotonicSeconds()
        let writer = try server.connect()
        try writer.call("set", ["object": "a", "keyPath": "v", "value": .string(String(repeating: "z", count: 100))], timeout: 60)
        #expect(monotonicSeconds() - start < 10)
        // 100 bytes -> 6,400 -> 409,600 -> would be 26,214,400: the third write is refused.
        expectEqual(try writer.call("get", ["object": "b", "keyPath": "v"])["value"]?.stringValue?.utf8.count, 6_400)
        expectEqual(try writer.call("get", ["object": "c", "keyPath": "v"])["value"]?.stringValue?.utf8.count, 409_600)
        expectEqual(try writer.call("get", ["object": "d", "keyPath": "v"])["value"], "", "not written")
        let event = try #require(try creator.nextEvent(timeout: 10))
        #expect(event["event"] == "binding" && event["binding"] == ids[2] && event["reason"] == "refused", "\(event)")
        expectEqual(event["error"]?["code"], "too_large", "\(event)")
        #expect((event["error"]?["message"]?.stringValue ?? "").contains("larger than"), "\(event)")
        #expect(Self.residentBytes(server) < 150 << 20, "RSS \(Self.residentBytes(server) >> 20) MB")
        expectEqual(try writer.call("ping")["ok"], true)
    }

    @Test("concatenation is linear: a 1 MB string built from 499 pieces of 2,100 bytes is quick; one more piece is over the limit")
    func linearConcatenation() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        try client.call("defineClass", ["class": [
            "name": "L", "properties": ["p": ["type": "string"]],
            "computed": ["big": .string(Self.repeated("p", 499)), "len": "len(big)",
                         "over": .string(Self.repeated("p", 500)), "overLen": "len(over)"],
        ]])
        let start = monotonicSeconds()
        try client.call("create", ["object": "l", "class": "L", "values": ["p": .string(String(repeating: "q", count: 2_100))]])
        expectEqual(try client.call("get", ["object": "l", "keyPath": "len"])["value"], 1_047_900)
        expectEqual(try client.call("get", ["object": "l", "keyPath": "overLen"])["value"], .null, "1,050,000 bytes > 1 MiB")
        #expect(monotonicSeconds() - start < 10)
    }
}
