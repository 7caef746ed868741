import Foundation
import KVOClient
import KVOJSON
import KVOWireProbe
import Testing

@testable import KVOTestSupport

/// Strict requests (issue 41) against the real kvod over real TCP: an unknown member is `bad_request` naming it,
/// in a plain request, a batch part, an `onDisconnect` request and an `ifEquals` object, with nothing applied;
/// `hello` announces the features; an unknown `KVOD_…` variable is a warning at start-up and an error under
/// `--check-config`; and the Swift client does not send a field the server did not announce.
@Suite struct StrictRequestsOverTCPTests {
    private func message(_ reply: JSONValue) -> String? {
        reply["error"]?["message"]?.stringValue
    }

    @Test("unknown members are refused in a request, a batch part, an onDisconnect request and an ifEquals object")
    func unknownMembersRefused() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        try client.call("create", ["object": "o", "values": ["n": 1]])
        let digest = try client.call("digest")["digest"]

        let misspelt = try client.request("set", ["object": "o", "keyPath": "n", "value": 2, "ifequals": ["keyPath": "n", "value": 99]])
        expectEqual(misspelt["error"]?["code"], "bad_request")
        expectEqual(message(misspelt), "unknown field 'ifequals' (did you mean 'ifEquals'?)")
        let amount = try client.request("increment", ["object": "o", "keyPath": "n", "amount": 10])
        expectEqual(message(amount)?.hasPrefix("unknown field 'amount': increment takes"), true, "\(amount)")

        let part = try client.request("batch", ["ops": [
            ["op": "set", "object": "o", "keyPath": "n", "value": 3],
            ["op": "set", "object": "o", "keyPath": "n", "value": 4, "ttll": 5],
        ]])
        expectEqual(part["error"]?["code"], "bad_request")
        expectEqual(part["error"]?["part"], 1)
        expectEqual(message(part), "part 1: unknown field 'ttll' (did you mean 'ttl'?)")

        try client.call("session")
        let action = try client.request("onDisconnect", ["request": ["op": "delete", "object": "o", "ifExist": true]])
        expectEqual(message(action), "'request': unknown field 'ifExist' (did you mean 'ifExists'?)")

        let inside = try client.request("set", ["object": "o", "keyPath": "n", "value": 5,
                                                "ifEquals": ["keyPath": "n", "value": 1, "expected": 1]])
        expectEqual(message(inside), "unknown field 'expected' in 'ifEquals'")
        let whereNull = try client.request("observe", ["pattern": "o*", "where": .null])
        expectEqual(message(whereNull), "'where' must be an expression, not null (leave the field out instead)")
        let optionsText = try client.request("observe", ["object": "o", "keyPath": "n", "options": "new"])
        expectEqual(optionsText["error"]?["code"], "bad_request")

        expectEqual(try client.call("digest")["digest"], digest, "nothing was applied")
        expectEqual(try client.call("get", ["object": "o", "keyPath": "n"])["value"], 1)
        try client.call("endSession")
        expectEqual(try client.call("get", ["object": "o", "keyPath": "n"])["value"], 1, "no action was registered")
    }

    @Test("hello announces the protocol features")
    func helloAnnouncesFeatures() throws {
        let server = try KVODProcess()
        let reply = try server.connect().call("hello", ["client": "tests"])
        #expect(reply["features"] == ["atLeastRev", "compactEvents", "conditions", "ephemeral", "liveQueries", "sessions", "signals", "sinceRev", "ttl"])
    }

    @Test("an unknown KVOD_ variable: a warning at start-up naming it, an error under --check-config; tolerated ones pass")
    func unknownEnvironmentVariable() throws {
        let server = try KVODProcess(environment: ["KVOD_MAX_CONECTIONS": "5"])
        #expect(server.waitForLog("unknown environment variable KVOD_MAX_CONECTIONS (did you mean KVOD_MAX_CONNECTIONS?)"))
        try server.connect().call("ping")

        let check = try ConfigurationFileTests.runKVOD(["--check-config"], environment: ["KVOD_MAX_CONECTIONS": "5"])
        expectEqual(check.status, 64, "\(check)")
        #expect(check.stderr.contains("kvod: error: unknown environment variable KVOD_MAX_CONECTIONS (did you mean KVOD_MAX_CONNECTIONS?)"),
                "\(check.stderr)")
        let far = try ConfigurationFileTests.runKVOD(["--check-config"], environment: ["KVOD_SOMETHING_ELSE": "1"])
        #expect(far.status == 64 && far.stderr.contains("unknown environment variable KVOD_SOMETHING_ELSE:"), "\(far.stderr)")

        let tolerated = try ConfigurationFileTests.runKVOD(["--check-config"], environment: [
            "KVOD_PASSWORD": "x", "KVOD_NATS_SERVER": "/bin/true", "KVOD_BENCH_KEEP": "1", "KVOD_MAX_CONNECTIONS": "5",
        ])
        expectEqual(tolerated.status, 0, "\(tolerated.stderr)")
        #expect(tolerated.stdout.contains("configuration OK: 1 setting"), "\(tolerated.stdout)")
    }

    @Test("the Swift client does not send a field an older server did not announce, and sends it to kvod")
    func clientRefusesUnannouncedFields() async throws {
        // A stand-in for a server older than `features`: it answers everything with ok, so a field sent would pass.
        let older = try ScriptedKVOD(events: [])
        let client = try await KVOClient.connect(to: KVOClient.Configuration(host: "127.0.0.1", port: older.port,
                                                                             clientName: "tests", reconnection: nil))
        defer { client.close() }
        #expect(client.serverFeatures.isEmpty)
        func refusal(_ body: () async throws -> Void) async -> String? {
            do {
                try await body()
                return nil
            } catch let KVODError.notAnnounced(feature, _) {
                return feature
            } catch {
                return "\(error)"
            }
        }
        expectEqual(await refusal { _ = try await client.set("n", of: "o", to: 1, ttl: .seconds(5)) }, "ttl")
        expectEqual(await refusal { _ = try await client.set("n", of: "o", to: 1, if: [.exists]) }, "conditions")
        expectEqual(await refusal { _ = try await client.batch([try .create("o", ephemeral: true)]) }, "ephemeral")
        expectEqual(await refusal { _ = try await client.startSession() }, "sessions")
        #expect(await refusal {
            for try await _ in try await client.subscribe(pattern: "o*", where: "n > 1") { break }
        } == "liveQueries")
        expectEqual(await refusal { try await client.ping() }, nil, "a request that needs no feature is sent")

        // The real kvod announces them: the same calls go through.
        let server = try KVODProcess()
        let current = try await KVOClient.connect(to: KVOClient.Configuration(host: "127.0.0.1", port: server.port,
                                                                              clientName: "tests", reconnection: nil))
        defer { current.close() }
        #expect(current.serverFeatures.contains("ttl") && current.serverFeatures.contains("conditions"))
        try await current.create("o", values: ["n": 1])
        expectEqual(await refusal { _ = try await current.set("n", of: "o", to: 2, ttl: .seconds(5), if: [.exists]) }, nil)
    }

    @Test("kvoclient does not send --ttl to a server that did not announce ttl")
    func cliRefusesUnannouncedFields() throws {
        let older = try ScriptedKVOD(events: [])
        let refused = try KVOClientProcess.run(["--port", String(older.port), "set", "o", "n", "1", "--ttl", "5"])
        #expect(refused.status != 0, "\(refused.stdout)")
        #expect(refused.stderr.contains("the server does not announce the protocol feature 'ttl'"), "\(refused.stderr)")
    }
}
