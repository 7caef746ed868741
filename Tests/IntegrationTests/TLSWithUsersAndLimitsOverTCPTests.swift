import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Where TLS meets the other layers of issue 11, against the real kvod over real TCP: a verified client
/// certificate logs its connection in as the user its CN names (identity), and a TLS client that pipelines
/// requests without reading is held off by back-pressure (read pausing) and gets every reply in order,
/// however its records were split.
@Suite struct TLSWithUsersAndLimitsOverTCPTests {
    private func code(_ reply: JSONValue) -> String? { reply["error"]?["code"]?.stringValue }

    @Test func aVerifiedClientCertificateWhoseCNNamesAUserLogsItsConnectionIn() throws {
        let certificates = try TestCertificates()
        let scratch = try TemporaryDirectory("tls-users")
        let usersFile = scratch.appending("users.json")
        // The client certificate's CN is "alice"; bob has a password only.
        try KVODUserTool.addUser("alice", password: "alice's password", rules: ["a-*=read,write"], usersFile: usersFile)
        try KVODUserTool.addUser("bob", password: "bob's password", rules: ["*=read,write,admin"], usersFile: usersFile)
        let server = try KVODProcess(["--users", usersFile] + certificates.serverArguments(clientAuth: "optional"))

        // With the certificate: alice, with alice's rules, and no auth request.
        let alice = try server.connectTLS(certificates.clientOptions(client: "client"))
        expectEqual(try alice.request("create", ["object": "a-1", "values": ["n": 1]])["ok"], true)
        expectEqual(code(try alice.request("create", ["object": "b-1"])), "forbidden")
        // Without one: nobody until auth, as on the plaintext port.
        let anonymous = try server.connectTLS(certificates.clientOptions())
        expectEqual(code(try anonymous.request("get", ["object": "a-1"])), "unauthenticated")
        expectEqual(try anonymous.call("auth", ["user": "bob", "password": "bob's password"])["user"], "bob")
        expectEqual(try anonymous.call("get", ["object": "a-1", "keyPath": "n"])["value"], 1)
        // The plaintext port never sees a certificate.
        let plain = try server.connect()
        expectEqual(code(try plain.request("get", ["object": "a-1"])), "unauthenticated")
    }

    @Test func aTLSClientPipeliningWithoutReadingIsHeldOffAndGetsEveryReplyInOrder() throws {
        let certificates = try TestCertificates()
        let server = try KVODProcess(["--max-pending-requests", "4"] + certificates.serverArguments())
        let client = try server.connectTLS(certificates.clientOptions())
        expectEqual(try client.request("create", ["object": "o", "values": ["v": .string(String(repeating: "v", count: 100)), "n": 0]])["ok"], true)
        // Rounds of 500 requests sent in one write (several per TLS record, lines split across records):
        // replies are flushed once per loop iteration, so kvod pauses after every fourth request, in the
        // middle of a record's plaintext, holding the rest. Each round is small enough for the kernel's
        // buffers, as one TLS connection cannot send and read from two threads at once.
        let rounds = 6, perRound = 500
        var id = 0
        for _ in 0..<rounds {
            var bytes: [UInt8] = []
            for _ in 0..<perRound {
                id += 1
                let request: JSONValue = id % 2 == 0
                    ? ["op": "set", "id": .int(Int64(id)), "object": "o", "keyPath": "n", "value": .int(Int64(id))]
                    : ["op": "get", "id": .int(Int64(id)), "object": "o", "keyPath": "v"]
                bytes += JSONWriter.bytes(request)
                bytes.append(0x0A)
            }
            try client.send(raw: bytes)
            for expected in (id - perRound + 1)...id {
                let reply = try client.readMessage()
                guard reply["id"] == .int(Int64(expected)), reply["ok"] == true else {
                    Issue.record("reply \(expected): \(reply)")
                    return
                }
            }
        }
        let count = rounds * perRound
        expectEqual(try client.call("get", ["object": "o", "keyPath": "n"])["value"], .int(Int64(count)))
        #expect(!server.log.contains("connection closed"), "\(server.log)")
    }
}
