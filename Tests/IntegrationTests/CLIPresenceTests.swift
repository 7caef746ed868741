import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// `kvoclient presence` (the real CLI against the real kvod): a mark held while the command runs and taken away
/// at once on Ctrl-C (`endSession`), an ephemeral mark, and usage errors refused before anything is sent. The
/// SIGKILLed case, where kvod ends the session after its grace, is `PresenceOverTCPTests`'.
@Suite("kvoclient presence")
struct CLIPresenceTests {
    @Test func aMarkIsHeldWhileRunningAndTakenAwayOnCtrlC() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        try client.call("create", ["object": "host", "values": ["online": false]])
        let mark = try KVOClientProcess.start(server, ["presence", "host", "online", "true", "--offline", "false", "--grace", "60"])
        let ephemeral = try KVOClientProcess.start(server, ["presence", "cursor", "at", #"{"x":1}"#, "--ephemeral"])
        expectEqual(mark.nextLine(timeout: 15)?.hasSuffix("grace 60.0 s"), true)
        expectEqual(ephemeral.nextLine(timeout: 15)?.hasSuffix("grace 10.0 s"), true, "the server's default grace")
        expectEqual(try client.call("get", ["object": "host", "keyPath": "online"])["value"], true)
        expectEqual(try client.call("get", ["object": "cursor"])["value"], ["at": ["x": 1]])
        // Ctrl-C ends the session at once: no waiting for the 60 s grace.
        mark.send(signal: SIGINT)
        ephemeral.send(signal: SIGTERM)
        expectEqual(mark.finish(timeout: 15).status, 0)
        expectEqual(ephemeral.finish(timeout: 15).status, 0)
        expectEqual(try client.call("get", ["object": "host", "keyPath": "online"])["value"], false)
        expectEqual(try client.request("get", ["object": "cursor"])["error"]?["code"], "not_found")
    }

    @Test func usageErrorsAndRefusalsSendNothing() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        try client.call("create", ["object": "host", "values": [:]])
        for bad in [["presence", "host", "online", "true"],
                    ["presence", "host", "online", "true", "--offline", "false", "--ephemeral"],
                    ["presence", "host", "a.b", "1", "--ephemeral"],
                    ["presence", "host", "online", "true", "--offline", "false", "--grace", "301"],
                    ["presence", "host", "online", "{bad", "--offline", "false"],
                    ["presence", "missing", "online", "true", "--offline", "false"],
                    ["presence", "host", "online", "true", "--ephemeral"]] {
            let refused = try KVOClientProcess.run(server, bad)
            #expect(refused.status != 0 && refused.stdout.isEmpty, "\(bad): \(refused)")
        }
        expectEqual(try client.call("get", ["object": "host"])["value"], [:], "nothing was set")
        expectEqual(try client.call("metrics")["text"]?.stringValue?.contains(#"kvod_sessions{state="attached"} 0"#), true)
    }
}
