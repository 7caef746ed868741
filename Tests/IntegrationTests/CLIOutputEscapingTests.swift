import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// The built `kvoclient` printing server-supplied text with control characters in it (`"evil\nroot"`,
/// ESC sequences, BEL, NUL, C1 controls, bidirectional overrides): every human-readable line shows
/// them escaped, one id per line; the JSON outputs stay valid JSON of the same value with no raw
/// control character.
@Suite("kvoclient output escaping")
struct CLIOutputEscapingTests {
    /// Ids chosen to forge output: a second line, a colour change, a bell, a NUL, a C1 CSI, a
    /// right-to-left override.
    static let hostileIDs = ["evil\nroot", "esc\u{1B}[31mred", "bel\u{07}", "nul\u{00}x", "c1\u{9B}x", "rlo\u{202E}txt"]

    /// True when `text` holds a character a terminal would act on: any C0 control but the newline,
    /// DEL, a C1 control, a line or paragraph separator or a bidirectional control.
    private func hasRawControl(_ text: String) -> Bool {
        text.unicodeScalars.contains { scalar in
            switch scalar.value {
            case 0x0A: return false
            case 0x00...0x1F, 0x7F...0x9F, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069: return true
            default: return false
            }
        }
    }

    @Test("list prints one escaped line per id; get and --json print valid JSON of the same value")
    func listAndGet() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        for id in Self.hostileIDs {
            try client.call("create", ["object": .string(id), "values": ["k\nx": "v\u{9B}\u{202E}\u{1B}", "n": 1]])
        }
        let list = try KVOClientProcess.run(server, ["list"])
        expectEqual(list.status, 0)
        #expect(!hasRawControl(list.stdout), "\(list.stdout.debugDescription)")
        expectEqual(list.lines, Self.hostileIDs.sorted().map { PrintableText.escaped($0, limit: .max) })
        expectEqual(list.lines.count, Self.hostileIDs.count, "one line per id")

        let get = try KVOClientProcess.run(server, ["get", "c1\u{9B}x"])
        expectEqual(get.status, 0)
        #expect(!hasRawControl(get.stdout), "\(get.stdout.debugDescription)")
        expectEqual(get.lines.count, 1)
        expectEqual(try JSONParser.parse(get.lines[0]), ["k\nx": "v\u{9B}\u{202E}\u{1B}", "n": 1])
    }

    @Test("subscribe: the event line escapes the object and key path; --json stays valid JSON; errors are one escaped line")
    func subscribeInfoAndErrors() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        try client.call("create", ["object": "evil\nroot", "values": ["k\u{1B}": 1]])
        let human = try KVOClientProcess.start(server, ["subscribe", "evil\nroot", "k\u{1B}", "--count", "1"])
        let json = try KVOClientProcess.start(server, ["subscribe", "evil\nroot", "k\u{1B}", "--count", "1", "--json"])
        _ = try waitForObservers(client, object: "evil\nroot", count: 2)

        // info, while the two observe: the key path escaped.
        let info = try KVOClientProcess.run(server, ["info", "evil\nroot"])
        expectEqual(info.status, 0)
        #expect(!hasRawControl(info.stdout), "\(info.stdout.debugDescription)")
        expectEqual(info.lines.count, 2)
        #expect(info.lines.allSatisfy { $0.contains(#"keyPath=k\u{1B}"#) }, "\(info.lines)")

        try client.call("set", ["object": "evil\nroot", "keyPath": "k\u{1B}", "value": "\u{07}\u{9B}"])
        let humanResult = human.finish(timeout: 10)
        expectEqual(humanResult.status, 0)
        #expect(!hasRawControl(humanResult.stdout), "\(humanResult.stdout.debugDescription)")
        expectEqual(humanResult.lines, [#"evil\nroot.k\u{1B}  valueChanged  rev=2  new="\u0007\u009b""#])
        let jsonResult = json.finish(timeout: 10)
        expectEqual(jsonResult.status, 0)
        #expect(!hasRawControl(jsonResult.stdout), "\(jsonResult.stdout.debugDescription)")
        expectEqual(jsonResult.lines.count, 1)
        let event = try JSONParser.parse(jsonResult.lines.first ?? "")
        expectEqual(event["object"], "evil\nroot")
        expectEqual(event["change"]?["new"], "\u{07}\u{9B}")

        // An error that quotes the id: one line, escaped.
        let missing = try KVOClientProcess.run(server, ["get", "gone\n\u{1B}[2J"])
        expectEqual(missing.status, 1)
        expectEqual(missing.errorLines, [#"kvoclient: error: not_found: object 'gone\n\u{1B}[2J' does not exist"#])
    }

    @Test("bindings print escaped endpoints and expressions")
    func bindings() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        try client.call("create", ["object": "a\nb", "values": ["x": 1]])
        try client.call("create", ["object": "c", "values": ["y": 0]])
        try client.call("bind", ["from": ["object": "a\nb", "keyPath": "x"], "to": ["object": "c", "keyPath": "y"]])
        let bindings = try KVOClientProcess.run(server, ["bindings"])
        expectEqual(bindings.status, 0, "\(bindings.stderr)")
        #expect(!hasRawControl(bindings.stdout), "\(bindings.stdout.debugDescription)")
        expectEqual(bindings.lines, [#"1  a\nb:x -> c:y"#])
        let json = try KVOClientProcess.run(server, ["bindings", "--json"])
        expectEqual(try JSONParser.parse(json.lines.first ?? "")["from"]?["object"], "a\nb")
    }
}
