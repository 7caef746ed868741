import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// kvod's log cannot be forged or flooded by what clients send: client text in log lines is escaped and
/// cut short, and error messages quoting client text are bounded. Reads the real kvod's stderr
/// (issue 10, item 12).
@Suite struct LogSafetyOverTCPTests {
    private static func endpoint(_ object: String, _ keyPath: String) -> JSONValue {
        ["object": .string(object), "keyPath": .string(keyPath)]
    }

    /// The log's lines (split on newlines only).
    private func lines(_ log: String) -> [Substring] {
        log.split(separator: "\n", omittingEmptySubsequences: false)
    }

    @Test func idsWithControlCharactersAreLoggedEscapedOnOneLine() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        let evil = "evil\nroot: forged\u{1B}[31m\u{7}\u{0}end"
        try client.call("create", ["object": .string(evil), "values": ["v": 1]])
        try client.call("create", ["object": "target", "values": ["w": 0]])
        try client.call("bind", ["from": Self.endpoint(evil, "v"), "to": Self.endpoint("target", "w")])
        try client.call("delete", ["object": .string(evil)])
        #expect(server.waitForLog("removed: sourceDeleted"), "\(server.log)")

        let log = server.log
        let line = try #require(lines(log).first { $0.contains("removed: sourceDeleted") })
        #expect(line.contains(#"evil\nroot: forged\u{1B}[31m\u{7}\u{0}end"#), "\(line)")
        #expect(!lines(log).contains { $0.hasPrefix("root") }, "no forged line")
        for control: UInt8 in [0x00, 0x07, 0x1B] {
            #expect(!log.utf8.contains(control), "raw control byte \(control) in the log")
        }
    }

    @Test func aRefusedBindingWriteOfALargeValueLogsABoundedLine() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        let classDefinition = #"{"name":"Code","properties":{"code":{"type":"string","pattern":"^[a-z]+$"}}}"#
        try client.call("defineClass", ["class": try JSONParser.parse(Array(classDefinition.utf8))])
        try client.call("create", ["object": "source", "values": ["s": "ok"]])
        try client.call("create", ["object": "target", "class": "Code", "values": ["code": "abc"]])
        try client.call("bind", ["from": Self.endpoint("source", "s"), "to": Self.endpoint("target", "code")])
        let huge = String(repeating: "A", count: 500_000) + "\n\u{1B}[2J"
        for round in 0..<3 {
            try client.call("set", ["object": "source", "keyPath": "s", "value": .string(huge + "\(round)")])
            let event = try #require(try client.nextEvent(timeout: 5))
            expectEqual(event["reason"], "refused", "\(event)")
            let message = try #require(event["error"]?["message"]?.stringValue)
            #expect(message.utf8.count <= KVOErrorLimits.maximumMessageLength + 32, "\(message.utf8.count) bytes")
        }
        #expect(server.waitForLog("write refused"), "\(server.log)")
        let longest = lines(server.log).map(\.utf8.count).max() ?? 0
        #expect(longest < 4096, "longest log line \(longest) bytes")
        #expect(!server.log.utf8.contains(0x1B))

        // An error reply quoting a long client string is cut short too, and the connection serves on.
        let name = String(repeating: "N", count: 300_000)
        let reply = try client.request("create", ["object": "x", "class": .string(name)])
        expectEqual(reply["error"]?["code"], "not_found", "\(reply["error"]?["code"] ?? .null)")
        let message = try #require(reply["error"]?["message"]?.stringValue)
        #expect(message.utf8.count <= KVOErrorLimits.maximumMessageLength + 32, "\(message.utf8.count) bytes")
        #expect(message.contains("300"), "states the length: \(message.suffix(40))")
        expectEqual(try client.call("ping")["ok"], true)
    }
}

/// The bound on error messages the server promises (KVOError.maximumMessageLength, docs/protocol.md).
private enum KVOErrorLimits {
    static let maximumMessageLength = 2048
}
