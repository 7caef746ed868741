import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Issue 10 item 6, the limits: `--max-value-bytes` and `--max-object-bytes` refuse writes over them with
/// `too_large` (nothing changes, no event, the store after a restart is what was acknowledged), and kvod
/// refuses an object limit that an event could not carry within `--max-output-buffer`.
@Suite("size limits over TCP")
struct SizeLimitsOverTCPTests {
    static func text(_ count: Int) -> JSONValue { .string(String(repeating: "x", count: count)) }

    @Test("values and objects over the limits are refused and the store is unchanged, also after a restart")
    func overTheLimitsIsRefused() throws {
        let directory = try TemporaryDirectory("size-limits")
        let server = try KVODProcess(["--max-value-bytes", "1000", "--max-object-bytes", "4000"],
                                     dataDirectory: directory.appending("data"))
        let client = try server.connect()
        let observer = try server.connect()
        try client.call("create", ["object": "o", "values": ["list": []]])
        try client.call("create", ["object": "source", "values": ["v": 0]])
        try client.call("bind", ["from": ["object": "source", "keyPath": "v"], "to": ["object": "o", "keyPath": "copy"],
                                 "convert": "$0 + $0", "now": false])
        _ = try observer.call("observe", ["object": "o", "keyPath": "list", "options": ["new"]])
        _ = try observer.call("observe", ["object": "o", "keyPath": "v", "options": ["new"]])
        for index in 0..<3 { try client.call("set", ["object": "o", "keyPath": .string("k\(index)"), "value": Self.text(990)]) }
        _ = try drainEvents(observer)
        let before = try client.call("get", ["object": "o"])["value"]

        // A value over 1000 bytes, by set, insert, replace and create.
        for (op, params) in [
            ("set", ["object": "o", "keyPath": "v", "value": Self.text(999)]),
            ("insert", ["object": "o", "keyPath": "list", "values": [1, Self.text(999)]]),
            ("create", ["object": "p", "values": ["v": Self.text(999)]]),
        ] as [(String, [String: JSONValue])] {
            let reply = try client.request(op, params)
            expectError(reply, code: "too_large", op)
            expectEqual(reply["error"]?["message"]?.stringValue?.contains("--max-value-bytes"), true, "\(reply)")
        }
        // An object over 4000 bytes: 3 x ~997 bytes are in; one more is too many.
        let reply = try client.request("set", ["object": "o", "keyPath": "k3", "value": Self.text(990)])
        expectError(reply, code: "too_large", "object limit")
        expectEqual(reply["error"]?["message"]?.stringValue?.contains("--max-object-bytes"), true, "\(reply)")
        expectError(try client.request("insert", ["object": "o", "keyPath": "list", "values": [Self.text(998)]]),
                    code: "too_large", "object limit by insert")
        // A binding's write over the value limit (a 600-byte source doubled) is refused too; the target is unchanged.
        try client.call("set", ["object": "source", "keyPath": "v", "value": Self.text(600)])
        expectEqual(try client.call("get", ["object": "o"])["value"], before)
        try expectNoEvents(observer, "a refused write notified")
        expectEqual(try client.request("get", ["object": "p"])["error"]?["code"], "not_found")

        // Shrinking an object is always allowed, and then it can grow again.
        try client.call("set", ["object": "o", "keyPath": "k0", "value": 1])
        try client.call("insert", ["object": "o", "keyPath": "list", "values": [Self.text(900)]])
        let acknowledged = try client.call("get", ["object": "o"])["value"]
        let restarted = try server.restart()
        expectEqual(try restarted.connect().call("get", ["object": "o"])["value"], acknowledged)
    }

    @Test("an object limit that an event with old and new could not carry is refused at start-up")
    func inconsistentFlagsAreRefused() throws {
        for arguments in [["--max-object-bytes", String(16 << 20)],
                          ["--max-output-buffer", String(8 << 20), "--max-object-bytes", String(4 << 20)],
                          ["--max-value-bytes", "5000", "--max-object-bytes", "4000"]] {
            do {
                let server = try KVODProcess(arguments)
                server.stop()
                Issue.record("kvod started with \(arguments)")
            } catch let KVODProcessError.exitedEarly(status, log) {
                #expect(status != 0 && status != 4 && status != 5, "\(arguments): status \(status)")
                #expect(log.contains("--max-object-bytes"), "\(arguments): \(log)")
            }
        }
        // The defaults are consistent, follow a lowered buffer, and a raised buffer allows a raised object limit.
        _ = try KVODProcess(["--max-output-buffer", String(8 << 20)])
        _ = try KVODProcess(["--max-object-bytes", String(40 << 20), "--max-output-buffer", String(81 << 20)])
    }
}
