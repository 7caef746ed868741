import KVOJSON
#if canImport(Glibc)
import Glibc
import KVOEngine
import KVOModel
#endif

/// The host part of a `Host` header or of an `Origin`, checked and normalised: lower case, one trailing dot
/// removed ("localhost." is "localhost"), an IPv6 literal without its brackets. A value; any thread.
struct HTTPAuthority: Equatable {
    /// The kinds of host.
    enum Kind: Equatable {
        case ipv4, ipv6, name
    }

    /// Normalised host: "127.0.0.1", "::1" (no brackets), "localhost", "kvod.example".
    let host: String
    let kind: Kind
    /// The port given after the host, or nil.
    let port: Int?

    /// Longest `Host` value looked at: a 253-byte DNS name, brackets, ":" and 5 digits fit.
    static let maximumLength = 300

    /// Parses `host [":" port]` (RFC 9110 section 7.2: uri-host, an IP literal in brackets, a registered
    /// name of letters, digits, "-", "_" and "."), or says what is wrong with it. Userinfo ("a@host"), percent
    /// escapes, a path, spaces, an unbracketed IPv6 address, an empty or non-numeric port are all refused.
    static func parse(_ text: Substring) -> Result<HTTPAuthority, HTTPHostCheck.Refusal> {
        func malformed(_ why: String) -> Result<HTTPAuthority, HTTPHostCheck.Refusal> {
            .failure(.init(status: .badRequest, reason: "malformed Host '\(PrintableText.escaped(String(text), limit: 100))': \(why)"))
        }
        guard text.utf8.count <= maximumLength else {
            return .failure(.init(status: .badRequest, reason: "Host longer than \(maximumLength) bytes"))
        }
        guard !text.isEmpty else { return malformed("empty") }
        var hostPart: Substring
        var rest: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return malformed("no ']' after an IPv6 address") }
            hostPart = text[text.index(after: text.startIndex)..<close]
            rest = text[text.index(after: close)...]
        } else if let colon = text.firstIndex(of: ":") {
            hostPart = text[..<colon]
            rest = text[colon...]
        } else {
            hostPart = text
            rest = ""
        }
        var port: Int?
        if !rest.isEmpty {
            guard rest.first == ":" else { return malformed("text after the host") }
            let digits = rest.dropFirst()
            guard (1...5).contains(digits.utf8.count), digits.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
                  let value = Int(digits), value <= 65535
            else { return malformed("the port is not a number from 0 to 65535") }
            port = value
        }
        if text.hasPrefix("[") {
            guard isAddress(String(hostPart), family: AF_INET6) else { return malformed("not an IPv6 address") }
            return .success(HTTPAuthority(host: canonicalIPv6(String(hostPart)), kind: .ipv6, port: port))
        }
        guard !hostPart.isEmpty else { return malformed("no host") }
        guard hostPart.utf8.allSatisfy(isNameByte) else { return malformed("a host is letters, digits, '-', '_' and '.'") }
        var host = hostPart.lowercased()
        if host.hasSuffix("."), host.count > 1 { host.removeLast() }
        if isAddress(host, family: AF_INET) { return .success(HTTPAuthority(host: host, kind: .ipv4, port: port)) }
        return .success(HTTPAuthority(host: host, kind: .name, port: port))
    }

    /// A host name given to `--http-allowed-host`, normalised as a `Host` is; nil when it is not a bare name.
    static func allowedName(_ text: String) -> String? {
        guard case let .success(authority) = parse(Substring(text)), authority.kind == .name, authority.port == nil
        else { return nil }
        return authority.host
    }

    /// Whether the host is a loopback address (127.0.0.0/8, ::1) or "localhost".
    var isLoopback: Bool {
        switch kind {
        case .ipv4: host.hasPrefix("127.")
        case .ipv6: host == "::1"
        case .name: host == "localhost"
        }
    }

    /// The port, or the scheme's default one (80, or 443 with TLS).
    func effectivePort(usesTLS: Bool) -> Int { port ?? (usesTLS ? 443 : 80) }

    private static func isNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."):
            true
        default:
            false
        }
    }

    /// Whether `text` is a numeric address of `family` (inet_pton: dotted-decimal IPv4 only, no "127.1" or hex).
    private static func isAddress(_ text: String, family: Int32) -> Bool {
        var buffer = (UInt64(0), UInt64(0))
        return withUnsafeMutableBytes(of: &buffer) { inet_pton(family, text, $0.baseAddress) == 1 }
    }

    /// The RFC 5952 text of an IPv6 address ("0:0:0:0:0:0:0:1" is "::1").
    private static func canonicalIPv6(_ text: String) -> String {
        var buffer = (UInt64(0), UInt64(0))
        var output = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        return withUnsafeMutableBytes(of: &buffer) { bytes in
            guard inet_pton(AF_INET6, text, bytes.baseAddress) == 1,
                  inet_ntop(AF_INET6, bytes.baseAddress, &output, socklen_t(output.count)) != nil
            else { return text.lowercased() }
            return String(decoding: output.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
    }
}

/// The HTTP listener's defence against DNS rebinding and cross-site WebSockets (docs/protocol.md, "Host and
/// Origin"): which `Host` values a request may carry, and which `Origin` is the listener's own. Built once
/// from the configuration and the bound listener; immutable, any thread (the server uses it on the loop thread).
struct HTTPHostCheck {
    /// Why a request is refused, with the status to answer.
    struct Refusal: Error, Equatable {
        let status: HTTPStatus
        let reason: String
    }

    /// `--http-allowed-host` names, normalised (`HTTPAuthority.allowedName`).
    let allowedHosts: Set<String>
    /// `--http-allowed-origin` values, exact; "*" allows every origin.
    let allowedOrigins: [String]
    /// Whether the listener speaks TLS (its own origins are https, else http).
    let usesTLS: Bool
    /// The port the listener is bound to (the real one when 0 was asked).
    let listenerPort: Int
    /// The address it is bound to ("127.0.0.1", "::1", "0.0.0.0"), normalised like a Host.
    let boundHost: String?

    init(configuration: HTTPConfiguration, listenerPort: Int, boundHost: String?) {
        allowedHosts = Set(configuration.allowedHosts.compactMap(HTTPAuthority.allowedName))
        allowedOrigins = configuration.allowedOrigins
        usesTLS = configuration.usesTLS
        self.listenerPort = listenerPort
        self.boundHost = boundHost
    }

    /// The check for a bound listener (its address as `TCPListener.addressDescription` gives it, e.g.
    /// "127.0.0.1:7480" or "[::1]:7480").
    init(configuration: HTTPConfiguration, boundAddress: String, port: Int) {
        let bound = try? HTTPAuthority.parse(Substring(boundAddress)).get()
        self.init(configuration: configuration, listenerPort: port, boundHost: bound?.host)
    }

    /// The one check every request goes through before it is routed: the `Host` it names. Any IP literal
    /// passes (DNS rebinding needs a name the attacker's DNS answers, so a literal address is one the
    /// client really connected to), and so do "localhost" and the `--http-allowed-host` names; any other
    /// name is 421. A missing Host on HTTP/1.1, a repeated one or a malformed one is 400 (RFC 9112 section 3.2).
    /// HTTP/1.0 may omit it (browsers always send it).
    func check(host: String?, minorVersion: Int) -> Result<HTTPAuthority?, Refusal> {
        guard let host else {
            if minorVersion == 0 { return .success(nil) }
            return .failure(Refusal(status: .badRequest, reason: "an HTTP/1.1 request needs a Host header"))
        }
        // The parser joins repeated headers with ", "; a comma is never part of a host.
        if host.contains(",") { return .failure(Refusal(status: .badRequest, reason: "more than one Host header")) }
        let authority: HTTPAuthority
        switch HTTPAuthority.parse(Substring(host).trimmingSpaces) {
        case let .success(parsed): authority = parsed
        case let .failure(refusal): return .failure(refusal)
        }
        guard authority.kind != .name || authority.host == "localhost" || allowedHosts.contains(authority.host) else {
            let shown = PrintableText.escaped(authority.host, limit: 100)
            return .failure(Refusal(status: .misdirectedRequest, reason: """
                Host '\(shown)' is not served here: kvod answers HTTP for IP addresses, localhost and the names \
                given with --http-allowed-host (a defence against DNS rebinding); start kvod with \
                --http-allowed-host \(shown) if this name is kvod's
                """))
        }
        return .success(authority)
    }

    /// Whether a WebSocket upgrade carrying `origin` may proceed (`host`: the request's Host, already
    /// checked). No Origin (not a browser), "*" or a listed origin: yes. Otherwise the origin must be the
    /// listener's own: its scheme (http, or https with `--http-tls`) and either exactly the request's Host
    /// (a page kvod served, as the browser addressed it), or localhost, a loopback address, the bound
    /// address or an `--http-allowed-host` name with the listener's port. Not "any IP literal": a page at
    /// http://203.0.113.7:PORT/ is someone else's.
    func allows(origin: String?, host: HTTPAuthority?) -> Bool {
        guard let origin else { return true }
        if allowedOrigins.contains("*") || allowedOrigins.contains(origin) { return true }
        let scheme = usesTLS ? "https://" : "http://"
        guard origin.utf8.count > scheme.utf8.count, origin.lowercased().hasPrefix(scheme),
              case let .success(own) = HTTPAuthority.parse(origin.dropFirst(scheme.count))
        else { return false }
        let port = own.effectivePort(usesTLS: usesTLS)
        if let host, own.host == host.host, port == host.effectivePort(usesTLS: usesTLS) { return true }
        guard port == listenerPort else { return false }
        return own.isLoopback || own.host == boundHost || (own.kind == .name && allowedHosts.contains(own.host))
    }
}
