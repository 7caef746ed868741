import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// `kvoclient signal` and `kvoclient subscribe` printing the signals it hears (the real CLI against the real kvod;
/// docs/protocol.md, "Signals").
@Suite("kvoclient signal")
struct CLISignalTests {
    @Test func signalAndSubscribe() throws {
        let server = try KVODProcess()
        let writer = try server.connect()
        try writer.call("create", ["object": "room", "values": ["topic": "kvo"]])
        let lines = try KVOClientProcess.start(server, ["subscribe", "room", "topic", "--count", "2"])
        let json = try KVOClientProcess.start(server, ["subscribe", "--pattern", "ro*", "--json", "--count", "1"])
        _ = try waitForObservers(writer, object: "room", count: 2)
        let sent = try KVOClientProcess.run(server, ["signal", "room", #"{"x":3,"y":4}"#])
        #expect(sent.status == 0 && sent.stdout == "sent\n", "\(sent.stdout) \(sent.stderr)")
        #expect(try KVOClientProcess.run(server, ["signal", "room", "typing"]).status == 0)
        let printed = lines.finish()
        #expect(printed.status == 0, "\(printed.stderr)")
        #expect(printed.stdout.split(separator: "\n") == [#"room  signal  rev=1  new={"x":3,"y":4}"#, #"room  signal  rev=1  new="typing""#])
        let event = try JSONParser.parse(Array(json.finish().stdout.utf8.prefix { $0 != 0x0A }))
        #expect(event["reason"] == "signal" && event["object"] == "room" && event["change"]?["new"] == ["x": 3, "y": 4]
                && event["keyPath"] == nil, "\(event)")
        // Refusals: an unknown object, a payload too large; exit 1 with the server's words.
        let missing = try KVOClientProcess.run(server, ["signal", "nowhere", "1"])
        #expect(missing.status == 1 && missing.stderr.contains("not_found"), "\(missing.stderr)")
        let large = try KVOClientProcess.run(server, ["signal", "room", String(repeating: "x", count: 70_000)])
        #expect(large.status == 1 && large.stderr.contains("too_large"), "\(large.stderr)")
    }
}
