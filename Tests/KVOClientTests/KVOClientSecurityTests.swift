import Foundation
import KVOClient
import KVOWireProbe
import Testing

@testable import KVOTestSupport

/// KVOClient with kvod's security features over real TCP: TLS (the shared client TLS session), password
/// and token logins sent after `hello`, refused credentials and permission errors with their details.
@Suite struct KVOClientSecurityTests {
    @Test("TLS: requests and observations over kvod's TLS port; an untrusted server certificate is refused")
    func tls() async throws {
        let certificates = try TestCertificates()
        let server = try KVODProcess(certificates.serverArguments())
        var configuration = server.clientConfiguration()
        configuration.port = server.tlsPort
        configuration.tls = certificates.clientOptions()
        let kvod = try await KVOClient.connect(to: configuration)
        try await kvod.create("o", values: ["n": 1] as JSONValue)
        let observation = try await kvod.subscribe("n", of: "o", options: [.initial, .new], as: Int.self)
        try await kvod.set("n", of: "o", to: 2)
        var values: [Int?] = []
        for try await change in observation {
            values.append(change.new)
            if values.count == 2 { break }
        }
        expectEqual(values, [1, 2])
        kvod.close()

        configuration.tls = certificates.clientOptions(trusting: "other-ca")
        let refused = await kvodError { _ = try await KVOClient.connect(to: configuration) }
        guard case let .tls(reason)? = refused else {
            Issue.record("expected a TLS error, got \(String(describing: refused))")
            return
        }
        #expect(reason.contains("certificate"))
    }

    @Test("password and token logins; wrong credentials fail connect with unauthenticated; forbidden carries object and permission")
    func credentials() async throws {
        let scratch = try TemporaryDirectory("client-auth")
        let usersFile = scratch.appending("users.json")
        try KVODUserTool.addUser("alice", password: "correct horse", usersFile: usersFile)
        try KVODUserTool.addUser("reader", password: "secret words", rules: ["pub-*=read"], usersFile: usersFile)
        let server = try KVODProcess(["--users", usersFile])

        var configuration = server.clientConfiguration()
        configuration.credentials = .password(user: "alice", password: "correct horse")
        let alice = try await KVOClient.connect(to: configuration)
        try await alice.create("pub-1", values: ["v": 1] as JSONValue)
        let token = try await alice.userAdministration("tokenCreate", ["user": "alice"])["token"]?.stringValue ?? ""

        configuration.credentials = .token(token)
        let service = try await KVOClient.connect(to: configuration)
        expectEqual(try await service.get("v", of: "pub-1"), 1)

        configuration.credentials = .password(user: "alice", password: "wrong")
        let wrong = await kvodError { _ = try await KVOClient.connect(to: configuration) }
        expectEqual(wrong?.code, .unauthenticated)

        configuration.credentials = nil
        let anonymous = try await KVOClient.connect(to: configuration)
        expectEqual(await kvodError { _ = try await anonymous.get("pub-1") }?.code, .unauthenticated)

        configuration.credentials = .password(user: "reader", password: "secret words")
        let reader = try await KVOClient.connect(to: configuration)
        expectEqual(try await reader.get("v", of: "pub-1"), 1)
        let forbidden = await kvodError { try await reader.set("v", of: "pub-1", to: 2) }
        guard case let .server(code, _, details)? = forbidden else {
            Issue.record("expected forbidden, got \(String(describing: forbidden))")
            return
        }
        #expect(code == .forbidden && details.object == "pub-1" && details.permission == "write")
    }
}
