import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// The Host and Origin rules of the HTTP listener (DNS rebinding) and the /metrics token rule, as pure
/// functions. Tests/Web/test_http_host.py drives the same rules over real TCP, route by route.
@Suite("HTTP Host, Origin and metrics access")
struct HTTPHostCheckTests {
    private static func check(allowedHosts: [String] = [], allowedOrigins: [String] = [], usesTLS: Bool = false,
                              port: Int = 7480, bound: String = "127.0.0.1:7480") -> HTTPHostCheck {
        HTTPHostCheck(configuration: HTTPConfiguration(port: port, allowedOrigins: allowedOrigins, allowedHosts: allowedHosts,
                                                       usesTLS: usesTLS),
                      boundAddress: bound, port: port)
    }

    private static func status(_ host: String?, _ check: HTTPHostCheck = check(), minorVersion: Int = 1) -> Int {
        switch check.check(host: host, minorVersion: minorVersion) {
        case .success: 200
        case let .failure(refusal): refusal.status.rawValue
        }
    }

    @Test("IP literals, localhost and allowed names pass; other names are 421")
    func hosts() {
        for host in ["127.0.0.1", "127.0.0.1:7480", "localhost", "LOCALHOST:1", "localhost.", "[::1]", "[::1]:7480",
                     "[0:0:0:0:0:0:0:1]", "10.0.0.7:7480", "[2001:db8::1]", " 127.0.0.1 "] {
            expectEqual(Self.status(host), 200, "\(host)")
        }
        for host in ["evil.example", "rebind.attacker.test:7480", "127.0.0.1.evil.example", "127.1", "0x7f000001",
                     "localhost..", "a.localhost", "kvod.example.com"] {
            expectEqual(Self.status(host), 421, "\(host)")
        }
        let allowing = Self.check(allowedHosts: ["KVOD.Example.com.", "health"])
        for host in ["kvod.example.com", "kvod.example.com.:443", "Health:80"] {
            expectEqual(Self.status(host, allowing), 200, "\(host)")
        }
        expectEqual(Self.status("evil.kvod.example.com", allowing), 421)
    }

    @Test("malformed, missing or repeated Host values are 400")
    func malformedHosts() {
        for host in ["", "a@127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:+80", "::1", "[::1", "[::1]:",
                     "[::1]z", "[fe80::1%eth0]", "[127.0.0.1]", "127.0.0.1/", "localhost, evil.example",
                     "h%2e", String(repeating: "a", count: 301), "é.example"] {
            expectEqual(Self.status(host), 400, "\(host)")
        }
        expectEqual(Self.status(nil), 400)
        expectEqual(Self.status(nil, minorVersion: 0), 200)
    }

    @Test("a refusal names the flag and escapes what it echoes")
    func refusalText() throws {
        guard case let .failure(refusal) = Self.check().check(host: "evil.example", minorVersion: 1) else {
            Issue.record("not refused")
            return
        }
        #expect(refusal.reason.contains("--http-allowed-host evil.example"))
        guard case let .failure(malformed) = Self.check().check(host: "a\u{1b}[31m@x", minorVersion: 1) else {
            Issue.record("not refused")
            return
        }
        #expect(!malformed.reason.contains("\u{1b}"))
    }

    @Test("the listener's own origin: its scheme, an own host and its port, or exactly the Host")
    func origins() throws {
        let plain = Self.check()
        let host = try plain.check(host: "127.0.0.1:7480", minorVersion: 1).get()
        #expect(plain.allows(origin: nil, host: host))
        for origin in ["http://127.0.0.1:7480", "http://localhost:7480", "http://[::1]:7480", "HTTP://LOCALHOST:7480"] {
            #expect(plain.allows(origin: origin, host: host), "\(origin)")
        }
        for origin in ["https://127.0.0.1:7480", "http://127.0.0.1:7481", "http://127.0.0.1", "http://evil.example:7480",
                       "http://203.0.113.7:7480", "http://127.0.0.1:7480/", "null", "", "http://", "ws://127.0.0.1:7480"] {
            #expect(!plain.allows(origin: origin, host: host), "\(origin)")
        }
        // The same authority as the Host (a port mapping), but not another address on the same port.
        let mapped = try plain.check(host: "10.0.0.7:8080", minorVersion: 1).get()
        #expect(plain.allows(origin: "http://10.0.0.7:8080", host: mapped))
        #expect(!plain.allows(origin: "http://10.0.0.8:7480", host: mapped))
        // TLS: https only, default port 443.
        let tls = Self.check(usesTLS: true, port: 443, bound: "0.0.0.0:443")
        let tlsHost = try tls.check(host: "localhost", minorVersion: 1).get()
        #expect(tls.allows(origin: "https://localhost", host: tlsHost))
        #expect(!tls.allows(origin: "http://localhost", host: tlsHost))
        #expect(!tls.allows(origin: "http://localhost:443", host: tlsHost))
        // The bound address and allowed names are own origins on the listener's port; listed origins and "*" pass.
        let named = Self.check(allowedHosts: ["kvod.example.com"], allowedOrigins: ["https://app.example.com"], bound: "192.0.2.5:7480")
        #expect(named.allows(origin: "http://kvod.example.com:7480", host: nil))
        #expect(named.allows(origin: "http://192.0.2.5:7480", host: nil))
        #expect(named.allows(origin: "https://app.example.com", host: nil))
        #expect(!named.allows(origin: "https://app.example.com.evil", host: nil))
        #expect(Self.check(allowedOrigins: ["*"]).allows(origin: "https://anything.example", host: nil))
    }

    @Test("--http-allowed-host takes bare names")
    func allowedHostNames() {
        #expect(HTTPConfiguration.isValidAllowedHost("kvod.example.com"))
        #expect(HTTPConfiguration.isValidAllowedHost("kvod"))
        for name in ["", "127.0.0.1", "[::1]", "kvod.example.com:80", "a@b", "*", "*.example.com", "a b"] {
            #expect(!HTTPConfiguration.isValidAllowedHost(name), "\(name)")
        }
    }

    @Test("/metrics needs a server admin's bearer token only with users on a non-loopback listener")
    func metricsAccess() throws {
        #expect(!HTTPMetricsAccess.needsToken(usersDefined: false, listenerIsLoopback: false))
        #expect(!HTTPMetricsAccess.needsToken(usersDefined: true, listenerIsLoopback: true))
        #expect(HTTPMetricsAccess.needsToken(usersDefined: true, listenerIsLoopback: false))
        let admin = AccessPolicy(rules: [try AccessRule(argument: "*=read,admin")])
        let reader = AccessPolicy(rules: [try AccessRule(argument: "*=read")])
        func decide(_ authorization: String?, loopback: Bool = false) -> HTTPMetricsAccess.Decision {
            HTTPMetricsAccess.decide(authorization: authorization, usersDefined: true, listenerIsLoopback: loopback) { token in
                switch token {
                case "kvod_admin": ("root", admin)
                case "kvod_reader": ("ann", reader)
                default: nil
                }
            }
        }
        expectEqual(decide(nil, loopback: true), .open)
        expectEqual(decide(nil), .noToken)
        expectEqual(decide("Bearer kvod_admin"), .granted)
        expectEqual(decide("bearer \t kvod_admin "), .granted)
        expectEqual(decide("Bearer kvod_reader"), .notAdmin(user: "ann"))
        expectEqual(decide("Bearer kvod_wrong"), .invalidToken)
        for value in ["Basic cm9vdDp4", "Bearer", "Bearer ", "Bearer kvod_admin, Bearer kvod_admin", "Bearerkvod_admin"] {
            expectEqual(decide(value), .noToken, "\(value)")
        }
        expectEqual(HTTPMetricsAccess.refusal(.noToken)?.status, .unauthorized)
        expectEqual(HTTPMetricsAccess.refusal(.noToken)?.headers.contains { $0.0 == "WWW-Authenticate" && $0.1.hasPrefix("Bearer") }, true)
        expectEqual(HTTPMetricsAccess.refusal(.notAdmin(user: "ann"))?.status, .forbidden)
        #expect(HTTPMetricsAccess.refusal(.granted) == nil)
    }
}
