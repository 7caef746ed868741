import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// TLS on kvod's listener (`--tls-port`), against the real kvod over real TCP, with certificates made by the
/// `openssl` command for each test (`TestCertificates`), kvod's own client (`KVOConnection` with TLS options)
/// and `openssl s_client` as an independent peer.
@Suite struct TLSOverTCPTests {
    private func errorCode(_ reply: JSONValue) -> String? {
        reply["error"]?["code"]?.stringValue
    }

    /// The error a `KVOConnection` attempt (connect and ping) ends with; nil when it succeeded.
    private func failure(_ attempt: () throws -> Void) -> KVOClientError? {
        do {
            try attempt()
            return nil
        } catch let error as KVOClientError {
            return error
        } catch {
            return .io("\(error)")
        }
    }

    // MARK: - Handshakes

    @Test func tlsAndPlaintextListenersServeTheSameStoreSideBySide() throws {
        let certificates = try TestCertificates()
        let server = try KVODProcess(certificates.serverArguments())
        #expect(server.tlsPort != 0 && server.tlsPort != server.port)
        let secure = try server.connectTLS(certificates.clientOptions())
        let plain = try server.connect()
        try secure.call("create", ["object": "o", "values": ["v": 1]])
        expectEqual(try plain.call("get", ["object": "o", "keyPath": "v"])["value"], 1)
        // An observation streams its events over TLS, in order.
        try secure.call("observe", ["object": "o", "keyPath": "v", "options": ["new"]])
        for value in 2...200 { try plain.call("set", ["object": "o", "keyPath": "v", "value": .int(Int64(value))]) }
        for value in 2...200 {
            let event = try #require(try secure.nextEvent(timeout: 10))
            expectEqual(event["change"]?["new"], .int(Int64(value)))
        }
        // A large reply (several TLS records) arrives whole.
        let big = String(repeating: "x", count: 200_000)
        try plain.call("set", ["object": "o", "keyPath": "big", "value": .string(big)])
        expectEqual(try secure.call("get", ["object": "o", "keyPath": "big"])["value"], .string(big))
    }

    @Test func aTLSOnlyServerListensOnTheTLSPortAlone() throws {
        let certificates = try TestCertificates()
        let server = try KVODProcess(["--port", "off"] + certificates.serverArguments())
        expectEqual(server.port, server.tlsPort)
        let secure = try server.connectTLS(certificates.clientOptions())
        expectEqual(try secure.call("ping")["ok"], true)
        #expect(!server.log.contains("listening\n") || server.log.contains("listening for TLS"))
    }

    @Test func aServerCertificateFromAnotherAuthorityIsRefusedByTheClient() throws {
        let certificates = try TestCertificates()
        let server = try KVODProcess(certificates.serverArguments())
        let error = failure { _ = try server.connectTLS(certificates.clientOptions(trusting: "other-ca")).call("ping") }
        guard case let .tls(reason) = error else {
            Issue.record("expected a TLS failure, got \(String(describing: error))")
            return
        }
        #expect(reason.contains("certificate"), "\(reason)")
        // The server logs the refused handshake in one line and carries on.
        #expect(server.waitForLog("TLS handshake failed"), "\(server.log)")
        expectEqual(try server.connectTLS(certificates.clientOptions()).call("ping")["ok"], true)
    }

    @Test func anExpiredServerCertificateIsRefusedByTheClient() throws {
        let certificates = try TestCertificates()
        let server = try KVODProcess(certificates.serverArguments("expired"))
        let error = failure { _ = try server.connectTLS(certificates.clientOptions()).call("ping") }
        guard case let .tls(reason) = error else {
            Issue.record("expected a TLS failure, got \(String(describing: error))")
            return
        }
        #expect(reason.contains("expired"), "\(reason)")
    }

    @Test func requiredClientCertificatesAreVerifiedAndTheirCommonNameKnown() throws {
        let certificates = try TestCertificates()
        let server = try KVODProcess(certificates.serverArguments(clientAuth: "require"), logLevel: "debug")
        // With a certificate from the CA: served, and the connection knows its CN.
        let alice = try server.connectTLS(certificates.clientOptions(client: "client"))
        expectEqual(try alice.call("ping")["ok"], true)
        #expect(server.waitForLog("clientCN=alice"), "\(server.log)")
        // Without a certificate, or with one from another CA: refused (TLS 1.3 clients learn it at their
        // first read, after their side of the handshake completed).
        for client in [nil, "mallory"] {
            let error = failure { _ = try server.connectTLS(certificates.clientOptions(client: client)).call("ping") }
            #expect(error != nil, "client certificate \(client ?? "none") was accepted")
        }
        #expect(server.waitForLog("certificate"), "\(server.log)")
        #expect(!server.log.contains("clientCN=mallory"))
        expectEqual(try alice.call("ping")["ok"], true)
    }

    @Test func optionalClientCertificatesLetClientsWithoutOneIn() throws {
        let certificates = try TestCertificates()
        let server = try KVODProcess(certificates.serverArguments(clientAuth: "optional"), logLevel: "debug")
        expectEqual(try server.connectTLS(certificates.clientOptions()).call("ping")["ok"], true)
        expectEqual(try server.connectTLS(certificates.clientOptions(client: "client")).call("ping")["ok"], true)
        #expect(server.waitForLog("clientCN=alice"))
        #expect(failure { _ = try server.connectTLS(certificates.clientOptions(client: "mallory")).call("ping") } != nil)
    }

    // MARK: - Reload

    @Test func sighupReloadsTheCertificateWithoutDroppingConnections() throws {
        let certificates = try TestCertificates()
        let live = certificates.path("live")
        try FileManager.default.copyItem(atPath: certificates.path("server.pem"), toPath: live + ".pem")
        try FileManager.default.copyItem(atPath: certificates.path("server.key"), toPath: live + ".key")
        let server = try KVODProcess(certificates.serverArguments("live"))
        let old = try server.connectTLS(certificates.clientOptions())
        try old.call("create", ["object": "o", "values": ["v": 1]])
        try old.call("observe", ["object": "o", "keyPath": "v", "options": ["new"]])
        // Swap in a certificate from the other CA and reload.
        for suffix in [".pem", ".key"] {
            try FileManager.default.removeItem(atPath: live + suffix)
            try FileManager.default.copyItem(atPath: certificates.path("other-server" + suffix), toPath: live + suffix)
        }
        server.send(signal: SIGHUP)
        #expect(server.waitForLog("reloaded the TLS certificate and key"), "\(server.log)")
        // The open connection keeps working and keeps its observation; new ones get the new certificate.
        try server.connect().call("set", ["object": "o", "keyPath": "v", "value": 2])
        expectEqual(try old.nextEvent(timeout: 10)?["change"]?["new"], 2)
        expectEqual(try old.call("ping")["ok"], true)
        #expect(failure { _ = try server.connectTLS(certificates.clientOptions()).call("ping") } != nil)
        expectEqual(try server.connectTLS(certificates.clientOptions(trusting: "other-ca")).call("ping")["ok"], true)
        // A failed reload (a key that does not match) keeps the current certificate and says so once.
        try FileManager.default.removeItem(atPath: live + ".key")
        try FileManager.default.copyItem(atPath: certificates.path("server.key"), toPath: live + ".key")
        server.send(signal: SIGHUP)
        #expect(server.waitForLog("TLS reload failed"), "\(server.log)")
        expectEqual(server.log.components(separatedBy: "TLS reload failed").count, 2)
        expectEqual(try server.connectTLS(certificates.clientOptions(trusting: "other-ca")).call("ping")["ok"], true)
        expectEqual(try old.call("ping")["ok"], true)
    }

    // MARK: - Traps of TLS over an event loop

    /// A reply queued before the handshake (the refusal of a connection past --max-connections, sent at
    /// accept): its `SSL_write` wants the ClientHello first; the plaintext stays queued and goes out, with
    /// the same length, once the handshake is done.
    @Test func outputQueuedBeforeTheHandshakeIsSentAfterIt() throws {
        let certificates = try TestCertificates()
        let server = try KVODProcess(["--max-connections", "1", "--tls-handshake-timeout", "1"] + certificates.serverArguments())
        let first = try server.connectTLS(certificates.clientOptions())
        try first.call("ping")
        let second = try server.connectTLS(certificates.clientOptions())
        let refusal = try second.readMessage(timeout: 10)
        expectEqual(errorCode(refusal), "too_many_connections", "\(refusal)")
        #expect(throws: KVOClientError.connectionClosed) { _ = try second.readMessage(timeout: 10) }
        // A refused connection that never starts its handshake does not wait for it for ever: the handshake
        // timeout closes it too.
        let silent = try KVOConnection(host: "127.0.0.1", port: server.tlsPort)
        let started = Date()
        #expect(throws: KVOClientError.self) { _ = try silent.readLine(timeout: 15) }
        #expect(Date().timeIntervalSince(started) < 12)
        try first.call("ping")
    }

    /// Output made outside a reply: TLS 1.3 session tickets right after the handshake (s_client sees them
    /// without sending a request); a KeyUpdate that requests one is answered (OpenSSL sends the answer
    /// before the next application data, as RFC 8446 4.6.3 asks) and the connection goes on.
    @Test func sessionTicketsAndKeyUpdateAnswersReachAnOpenSSLClient() throws {
        let certificates = try TestCertificates()
        let server = try KVODProcess(certificates.serverArguments())
        let session = certificates.path("session.pem")
        let client = try OpenSSLClient(port: server.tlsPort, arguments: [
            "-CAfile", certificates.path("ca.pem"), "-tls1_3", "-msg", "-sess_out", session,
        ])
        #expect(client.waitForOutput("NewSessionTicket"), "\(client.text)")
        client.send(#"{"op":"ping","id":1}"#)
        #expect(client.waitForOutput(#"{"id":1,"ok":true}"#), "\(client.text)")
        client.send("K")  // s_client: send a KeyUpdate that requests one back
        #expect(client.waitForOutput(">>> TLS 1.3, Handshake [length 0005], KeyUpdate"), "\(client.text)")
        client.send(#"{"op":"ping","id":2}"#)
        #expect(client.waitForOutput(#"{"id":2,"ok":true}"#), "\(client.text)")
        let answer = try #require(client.text.range(of: "<<< TLS 1.3, Handshake [length 0005], KeyUpdate"), "\(client.text)")
        #expect(answer.upperBound < client.text.range(of: #"{"id":2,"ok":true}"#)!.lowerBound)
        client.send("Q")
        #expect(client.waitForExit())
        // The ticket resumes a session.
        let resumed = try OpenSSLClient(port: server.tlsPort, arguments: [
            "-CAfile", certificates.path("ca.pem"), "-tls1_3", "-sess_in", session,
        ])
        #expect(resumed.waitForOutput("Reused, TLSv1.3"), "\(resumed.text)")
        resumed.send(#"{"op":"ping","id":3}"#)
        #expect(resumed.waitForOutput(#"{"id":3,"ok":true}"#), "\(resumed.text)")
    }

    /// TLS 1.2 works; a renegotiation request is refused (SSL_OP_NO_RENEGOTIATION) with a warning alert
    /// that kvod makes inside `SSL_read` and must send with no reply to carry it; the server goes on.
    @Test func tls12WorksAndRenegotiationIsRefused() throws {
        let certificates = try TestCertificates()
        let server = try KVODProcess(certificates.serverArguments())
        let client = try OpenSSLClient(port: server.tlsPort, arguments: ["-CAfile", certificates.path("ca.pem"), "-tls1_2", "-msg"])
        #expect(client.waitForOutput("Protocol  : TLSv1.2"), "\(client.text)")
        client.send(#"{"op":"ping","id":1}"#)
        #expect(client.waitForOutput(#"{"id":1,"ok":true}"#), "\(client.text)")
        client.send("R")
        #expect(client.waitForOutput("<<< TLS 1.2, Alert [length 0002], warning no_renegotiation"), "\(client.text)")
        // (s_client then gives up on the connection; kvod logs its alert and carries on.)
        expectEqual(try server.connectTLS(certificates.clientOptions()).call("ping")["ok"], true)
        // TLS 1.1 and older are not offered.
        let old = try OpenSSLClient(port: server.tlsPort, arguments: ["-tls1_1"])
        #expect(old.waitForExit())
        #expect(old.text.contains("alert protocol version"), "\(old.text)")
    }

    /// A TCP close without close_notify is an ordinary close; kvod's own close sends close_notify.
    @Test func aTCPCloseWithoutCloseNotifyIsOrdinaryAndOurCloseSendsOne() throws {
        let certificates = try TestCertificates()
        let server = try KVODProcess(certificates.serverArguments(), logLevel: "debug")
        let abrupt = try OpenSSLClient(port: server.tlsPort, arguments: ["-CAfile", certificates.path("ca.pem"), "-quiet"])
        abrupt.send(#"{"op":"create","object":"o","values":{"v":1},"id":1}"#)
        #expect(abrupt.waitForOutput(#""ok":true"#))
        abrupt.killAbruptly()
        #expect(server.waitForLog("client closed the connection"), "\(server.log)")
        #expect(!server.log.contains("TLS error"))
        // kvod stopping closes with close_notify: the client sees an orderly end, not a reset.
        let watcher = try OpenSSLClient(port: server.tlsPort, arguments: ["-CAfile", certificates.path("ca.pem"), "-tls1_3", "-msg"])
        #expect(watcher.waitForOutput("Verification: OK"))
        watcher.send(#"{"op":"ping","id":1}"#)
        #expect(watcher.waitForOutput(#"{"id":1,"ok":true}"#))
        server.stop()
        #expect(watcher.waitForOutput("<<< TLS 1.3, Alert [length 0002], warning close_notify"), "\(watcher.text)")
    }

    // MARK: - Bad clients

    @Test func badClientsAreClosedWithOneLineEachAndOthersCarryOn() throws {
        let certificates = try TestCertificates()
        let server = try KVODProcess(["--tls-handshake-timeout", "1"] + certificates.serverArguments())
        let good = try server.connectTLS(certificates.clientOptions())
        try good.call("create", ["object": "o", "values": ["v": 0]])
        try good.call("observe", ["object": "o", "keyPath": "v", "options": ["new"]])
        let writer = try server.connect()

        // A plaintext client on the TLS port.
        let plaintext = try KVOConnection(host: "127.0.0.1", port: server.tlsPort)
        try plaintext.send(raw: Array(#"{"op":"ping","id":1}"#.utf8) + [0x0A])
        #expect(throws: KVOClientError.self) { _ = try plaintext.readMessage(timeout: 10) }
        #expect(server.waitForLog("did not start with a TLS handshake"), "\(server.log)")

        // A TLS client on the plaintext port: told to use the TLS port in the log, closed.
        #expect(failure { _ = try KVOConnection(host: "127.0.0.1", port: server.port, tls: certificates.clientOptions()) } != nil)
        #expect(server.waitForLog("TLS clients must use the TLS port"), "\(server.log)")

        // Garbage that starts like a handshake record.
        let garbage = try KVOConnection(host: "127.0.0.1", port: server.tlsPort)
        try garbage.send(raw: [0x16, 0x03, 0x01, 0x00, 0x20] + Array(repeating: 0xAB, count: 32))
        #expect(throws: KVOClientError.self) { _ = try garbage.readMessage(timeout: 10) }
        #expect(server.waitForLog("TLS handshake failed"), "\(server.log)")

        // A client that stops in the middle of its handshake (half a ClientHello record).
        let stalled = try KVOConnection(host: "127.0.0.1", port: server.tlsPort)
        try stalled.send(raw: [0x16, 0x03, 0x01, 0x01, 0x00, 0x01, 0x00, 0x00, 0xFC, 0x03, 0x03])
        let started = Date()
        #expect(throws: KVOClientError.self) { _ = try stalled.readMessage(timeout: 15) }
        #expect(Date().timeIntervalSince(started) < 12)
        #expect(server.waitForLog("TLS handshake not finished within 1.0 s"), "\(server.log)")

        // Each bad client got one line; the good one noticed nothing.
        for line in ["did not start with a TLS handshake", "TLS clients must use the TLS port", "TLS handshake not finished"] {
            expectEqual(server.log.components(separatedBy: line).count, 2, "\(line): \(server.log)")
        }
        try writer.call("set", ["object": "o", "keyPath": "v", "value": 1])
        expectEqual(try good.nextEvent(timeout: 10)?["change"]?["new"], 1)
        expectEqual(try good.call("ping")["ok"], true)
    }

    @Test func aTLSAlertRecordIsNamedAsSuchNotAsAPlaintextClient() throws {
        let certificates = try TestCertificates()
        let server = try KVODProcess(certificates.serverArguments())
        // An alert record first: TLS 1.2 record header, fatal (2) unknown_ca (48).
        let alerting = try KVOConnection(host: "127.0.0.1", port: server.tlsPort)
        try alerting.send(raw: [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x30])
        #expect(throws: KVOClientError.self) { _ = try alerting.readMessage(timeout: 10) }
        #expect(server.waitForLog("TLS handshake failed: the client sent a TLS alert record (fatal unknown_ca) instead of a ClientHello"),
                "\(server.log)")
        // An alert record cut short (its body not readable): still named. (One line a second per kind.)
        // Time, not a marker: the log's one-second window runs on the real kvod's clock.
        Thread.sleep(forTimeInterval: 1.1)
        let short = try KVOConnection(host: "127.0.0.1", port: server.tlsPort)
        try short.send(raw: [0x15, 0x03, 0x01, 0x00, 0x20] + Array(repeating: 0xAB, count: 32))
        #expect(throws: KVOClientError.self) { _ = try short.readMessage(timeout: 10) }
        #expect(server.waitForLog("the client sent a TLS alert record instead of a ClientHello"), "\(server.log)")
        // A client that rejects kvod's certificate (it does not trust the test CA) sends its alert after
        // its ClientHello: OpenSSL's reason names the alert. (Again past the log's one-second window.)
        Thread.sleep(forTimeInterval: 1.1)
        let rejecting = try OpenSSLClient(port: server.tlsPort, arguments: ["-verify_return_error", "-tls1_3"])
        _ = rejecting.waitForExit(timeout: 10)
        #expect(server.waitForLog("alert unknown ca"), "\(server.log)")
        #expect(!server.log.contains("plaintext client on the TLS port"), "\(server.log)")
        // The same alert where plaintext is expected: named, closed at once (not left to the first-request timeout).
        let plain = try server.connect()
        try plain.send(raw: [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x30])
        #expect(throws: KVOClientError.self) { _ = try plain.readMessage(timeout: 10) }
        #expect(server.waitForLog("the client sent a TLS alert record (fatal unknown_ca) on the plaintext port: TLS clients must use the TLS port"),
                "\(server.log)")
        // Others carry on.
        let good = try server.connectTLS(certificates.clientOptions())
        expectEqual(try good.call("ping")["ok"], true)
    }

    // MARK: - Slow consumers

    @Test func aSlowTLSConsumerPastTheOutputLimitIsClosedAndOthersCarryOn() throws {
        let certificates = try TestCertificates()
        let server = try KVODProcess(["--max-output-buffer", "262144"] + certificates.serverArguments())
        let writer = try server.connect()
        try writer.call("create", ["object": "hot", "values": ["v": 0]])
        let sluggard = try server.connectTLS(certificates.clientOptions())
        try sluggard.call("observe", ["object": "hot", "keyPath": "v", "options": ["new", "old"]])
        let healthy = try server.connectTLS(certificates.clientOptions())
        try healthy.call("observe", ["object": "hot", "keyPath": "v", "options": ["new"]])
        let big = String(repeating: "z", count: 8_000)
        for index in 1...400 {
            try writer.call("set", ["object": "hot", "keyPath": "v", "value": .string("\(index)\(big)")])
            let event = try #require(try healthy.nextEvent(timeout: 10))
            expectEqual(event["change"]?["new"], .string("\(index)\(big)"))
        }
        #expect(server.waitForLog("output buffer limit exceeded"), "the reason is logged: \(server.log)")
        let observers = try writer.call("info", ["object": "hot"])["observers"]?.arrayValue ?? []
        expectEqual(observers.count, 1)
        expectEqual(try healthy.call("ping")["ok"], true)
    }

    // MARK: - kvoclient

    @Test func kvoclientSpeaksTLSWithAndWithoutAClientCertificate() throws {
        let certificates = try TestCertificates()
        let server = try KVODProcess(certificates.serverArguments(clientAuth: "optional"), logLevel: "debug")
        let tls = ["--port", String(server.tlsPort), "--tls", "--cacert", certificates.path("ca.pem")]
        expectSuccess(try KVOClientProcess.run(tls + ["create", "o", #"{"v":1}"#]), lines: ["rev 1"])
        expectSuccess(try KVOClientProcess.run(tls + ["get", "o", "v"]), lines: ["1"])
        // A client certificate, and a server name other than the address connected to.
        let named = tls + ["--cert", certificates.path("client.pem"), "--key", certificates.path("client.key"),
                           "--server-name", "localhost"]
        expectSuccess(try KVOClientProcess.run(named + ["set", "o", "v", "2"]), lines: ["rev 2"])
        #expect(server.waitForLog("clientCN=alice"), "\(server.log)")
        // Refusals: exit 3 with one line saying why.
        let wrongAuthority = try KVOClientProcess.run(["--port", String(server.tlsPort), "--tls", "--cacert",
                                                       certificates.path("other-ca.pem"), "ping"])
        expectEqual(wrongAuthority.status, 3)
        #expect(wrongAuthority.stderr.contains("kvoclient: error: TLS: the server's certificate was not accepted"), "\(wrongAuthority.stderr)")
        let wrongName = try KVOClientProcess.run(tls + ["--server-name", "kvod.example", "ping"])
        expectEqual(wrongName.status, 3)
        #expect(wrongName.stderr.contains("certificate"), "\(wrongName.stderr)")
        let withoutTLS = try KVOClientProcess.run(["--port", String(server.port), "--cacert", certificates.path("ca.pem"), "ping"])
        expectEqual(withoutTLS.status, 2)
        #expect(withoutTLS.stderr.contains("need --tls"), "\(withoutTLS.stderr)")
    }

    // MARK: - Flags

    @Test func tlsFlagsThatCannotWorkAreUsageErrors() throws {
        let certificates = try TestCertificates()
        let cases: [([String], String)] = [
            (["--port", "off"], "--port off needs --tls-port"),
            (["--tls-port", "0"], "--tls-port needs --tls-cert and --tls-key"),
            (["--tls-cert", certificates.path("server.pem")], "need --tls-port"),
            (certificates.serverArguments() + ["--tls-client-auth", "require"], "needs --tls-ca"),
            (certificates.serverArguments() + ["--tls-client-auth", "sometimes"], "none, optional or require"),
        ]
        for (arguments, message) in cases {
            do {
                _ = try KVODProcess(arguments)
                Issue.record("kvod started with \(arguments)")
            } catch let KVODProcessError.exitedEarly(status, log) {
                expectEqual(status, 2, "\(arguments)")
                #expect(log.contains(message), "\(arguments): \(log)")
            }
        }
        // A key that does not match the certificate: one clear line, exit 1.
        do {
            _ = try KVODProcess(["--tls-port", "0", "--tls-cert", certificates.path("server.pem"),
                                 "--tls-key", certificates.path("client.key")])
            Issue.record("kvod started with a mismatched key")
        } catch let KVODProcessError.exitedEarly(status, log) {
            expectEqual(status, 1)
            #expect(log.contains("cannot start: TLS: loading the private key") && log.contains("mismatch"), "\(log)")
        }
    }
}
