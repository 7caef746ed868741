#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import KVOJSON
@_exported import struct KVOClient.TLSClientOptions
import class KVOClient.TLSClientSession
import enum KVOClient.TLSSessionError

/// A raw JSON-lines socket probe for kvod's tests and kvod-bench; not a client library (it is no product
/// of the package, and `kvoclient` does not use it: the one client implementation is `KVOClient`).
///
/// It does what a client must not: sends bytes exactly as given (malformed JSON, partial lines, huge
/// lines: `send(raw:)`), reads raw lines and unparsed bytes (`readLine`, `receiveRaw`), binds to a chosen
/// source address, and leaves every decision (reconnection, resumption, heartbeat) to the test. For
/// convenience it also sends requests with ids it assigns and matches their replies (`request`, `call`,
/// `observe`), queuing events that arrive meanwhile for `nextEvent`. Blocking; not thread-safe: one thread
/// uses a connection at a time (`shutdownSocket()` excepted). The socket is closed by `close()` or on
/// deinit. With `tls` options it speaks TLS (kvod's `--tls-port`) through `KVOClient`'s TLS session, the
/// repository's single TLS client implementation, over the same blocking socket.
public final class KVOConnection {
    public let host: String
    public let port: Int
    private var socketDescriptor: Int32
    private var inbox: [UInt8] = []
    private var inboxStart = 0
    /// Where the search for the next newline resumes: the bytes from `inboxStart` up to here hold none,
    /// so a long line is scanned once as it arrives, not again after every chunk.
    private var inboxScanned = 0
    private var queuedEvents: [JSONValue] = []
    private var nextRequestID: Int64 = 1
    /// The TLS session, when connected with TLS options.
    private var tls: TLSClientSession?

    /// Connects to `host:port` (a name or a numeric IPv4/IPv6 address); with `tls`, then handshakes.
    public convenience init(host: String = "127.0.0.1", port: Int = 7420, tls: TLSClientOptions?) throws(KVOClientError) {
        try self.init(host: host, port: port)
        guard let tls else { return }
        do throws(KVOClientError) {
            do throws(TLSSessionError) {
                self.tls = try TLSClientSession(descriptor: socketDescriptor, host: host, options: tls)
            } catch {
                throw KVOClientError(error)
            }
        } catch {
            close()
            throw error
        }
    }

    /// Connects to `host:port` (a name or a numeric IPv4/IPv6 address). With `sourceAddress` (a numeric
    /// IPv4 address, such as 127.0.0.2 to be another peer on loopback) the socket is bound to it first.
    public init(host: String = "127.0.0.1", port: Int = 7420, sourceAddress: String? = nil) throws(KVOClientError) {
        self.host = host
        self.port = port
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc)
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
        hints.ai_socktype = SOCK_STREAM
        #endif
        var results: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &results)
        guard status == 0, let first = results else {
            throw .cannotConnect(host: host, port: port, reason: String(cString: gai_strerror(status)))
        }
        defer { freeaddrinfo(results) }
        var lastError = "no address"
        var candidate: UnsafeMutablePointer<addrinfo>? = first
        while let info = candidate {
            // Close-on-exec, so that a child process started meanwhile does not keep the connection open.
            #if canImport(Glibc)
            let socketType = info.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue)
            #else
            let socketType = info.pointee.ai_socktype
            #endif
            let descriptor = socket(info.pointee.ai_family, socketType, info.pointee.ai_protocol)
            if descriptor >= 0 {
                #if !canImport(Glibc)
                _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
                #endif
                if let sourceAddress, !KVOConnection.bind(descriptor, toIPv4: sourceAddress) {
                    lastError = "cannot bind to \(sourceAddress): \(String(cString: strerror(errno)))"
                } else if connect(descriptor, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 {
                    var one: Int32 = 1
                    setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                    socketDescriptor = descriptor
                    return
                } else {
                    lastError = String(cString: strerror(errno))
                }
                Glibc.close(descriptor)
            } else {
                lastError = String(cString: strerror(errno))
            }
            candidate = info.pointee.ai_next
        }
        throw .cannotConnect(host: host, port: port, reason: lastError)
    }

    deinit { close() }

    /// Binds `descriptor` to a numeric IPv4 address, any port.
    private static func bind(_ descriptor: Int32, toIPv4 address: String) -> Bool {
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        guard inet_pton(AF_INET, address, &local.sin_addr) == 1 else { return false }
        return withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                #if canImport(Glibc)
                Glibc.bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                #else
                Darwin.bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                #endif
            }
        }
    }

    /// Closes the socket; later calls fail with `connectionClosed`. Safe to call twice.
    public func close() {
        tls?.shutdown()
        tls = nil
        if socketDescriptor >= 0 {
            Glibc.close(socketDescriptor)
            socketDescriptor = -1
        }
    }


    /// Shuts the socket down both ways without closing it or freeing anything: a thread blocked reading this
    /// connection wakes up with `connectionClosed`. The one call that may come from another thread than the
    /// one using the connection (a load generator stopping its reader threads); `close()` afterwards, from
    /// the reading thread or once it has finished.
    public func shutdownSocket() {
        if socketDescriptor >= 0 { _ = Glibc.shutdown(socketDescriptor, Int32(SHUT_RDWR)) }
    }

    // MARK: - Raw I/O

    /// Sends bytes as they are (for tests of framing and bad input).
    public func send(raw bytes: [UInt8]) throws(KVOClientError) {
        guard socketDescriptor >= 0 else { throw .connectionClosed }
        if let tls {
            let result = bytes.withUnsafeBytes { raw in Result { () throws(TLSSessionError) in try tls.write(raw) }.mapError(KVOClientError.init) }
            return try result.get()
        }
        var sent = 0
        while sent < bytes.count {
            let result = bytes.withUnsafeBytes { raw in
                Glibc.send(socketDescriptor, raw.baseAddress! + sent, raw.count - sent, Int32(MSG_NOSIGNAL))
            }
            if result < 0 {
                if errno == EINTR { continue }
                if errno == EPIPE || errno == ECONNRESET { throw .connectionClosed }
                throw .io(String(cString: strerror(errno)))
            }
            sent += result
        }
    }

    /// Sends one message: its compact JSON and a newline.
    public func send(_ message: JSONValue) throws(KVOClientError) {
        var bytes = JSONWriter.bytes(message)
        bytes.append(0x0A)
        try send(raw: bytes)
    }

    /// Whether reading the server's heartbeat (`{"event":"heartbeat"}`, sent to a connection quiet for half of kvod's
    /// `--idle-timeout`) answers it with an empty line, which kvod ignores but counts as a sign of life; true unless a
    /// test plays a client that does not answer.
    public var answersHeartbeats = true
    static let heartbeatLine = Array(#"{"event":"heartbeat"}"#.utf8)

    /// Reads the next line (without its newline). `timeout` in seconds; nil waits forever.
    public func readLine(timeout: Double? = 10) throws(KVOClientError) -> [UInt8] {
        let deadline = timeout.map { monotonicSeconds() + $0 }
        while true {
            if let newline = inbox[max(inboxStart, inboxScanned)...].firstIndex(of: 0x0A) {
                var line = Array(inbox[inboxStart..<newline])
                inboxStart = newline + 1
                if inboxStart > 65536 {
                    inbox.removeFirst(inboxStart)
                    inboxStart = 0
                }
                inboxScanned = inboxStart
                if line.last == 0x0D { line.removeLast() }
                // Any bytes answer the server's heartbeat; an empty line gets no reply, so no reader sees the answer.
                if answersHeartbeats, line == KVOConnection.heartbeatLine { try? send(raw: [0x0A]) }
                return line
            }
            inboxScanned = inbox.count
            try fill(deadline: deadline)
        }
    }

    /// Reads the next message of any kind (reply or event) as JSON.
    public func readMessage(timeout: Double? = 10) throws(KVOClientError) -> JSONValue {
        let line = try readLine(timeout: timeout)
        guard let message = try? JSONParser.parse(line), message.objectValue != nil else {
            throw .malformedMessage(String(decoding: line, as: UTF8.self))
        }
        return message
    }

    private func fill(deadline: Double?) throws(KVOClientError) {
        guard socketDescriptor >= 0 else { throw .connectionClosed }
        if let tls, tls.bufferedByteCount > 0 {
            try readTLS(tls)
            return
        }
        var descriptor = pollfd(fd: socketDescriptor, events: Int16(POLLIN), revents: 0)
        while true {
            var waitMilliseconds: Int32 = -1
            if let deadline {
                let remaining = deadline - monotonicSeconds()
                if remaining <= 0 { throw .timedOut }
                waitMilliseconds = Int32(min(remaining * 1000, 60_000).rounded(.up))
            }
            let ready = poll(&descriptor, 1, waitMilliseconds)
            if ready < 0 {
                if errno == EINTR { continue }
                throw .io(String(cString: strerror(errno)))
            }
            if ready > 0 { break }
        }
        if let tls {
            try readTLS(tls)
            return
        }
        var chunk = [UInt8](repeating: 0, count: 65536)
        let count = chunk.withUnsafeMutableBytes { recv(socketDescriptor, $0.baseAddress, $0.count, 0) }
        if count == 0 { throw .connectionClosed }
        if count < 0 {
            if errno == EINTR || errno == EAGAIN { return }
            if errno == ECONNRESET { throw .connectionClosed }
            throw .io(String(cString: strerror(errno)))
        }
        inbox.append(contentsOf: chunk[0..<count])
    }

    /// Reads what TLS has for us (blocking until a whole record arrived, once the socket was readable).
    private func readTLS(_ tls: TLSClientSession) throws(KVOClientError) {
        var chunk = [UInt8](repeating: 0, count: 16384)
        let result = chunk.withUnsafeMutableBytes { raw in Result { () throws(TLSSessionError) in try tls.read(into: raw) }.mapError(KVOClientError.init) }
        let count = try result.get()
        if count == 0 { throw .connectionClosed }
        inbox.append(contentsOf: chunk[0..<count])
    }

    /// Reads whatever bytes arrive next, unparsed, into `buffer` (blocking): bytes already received and
    /// not yet handed out come first. For load generators that count lines rather than parse them
    /// (kvod-bench); mixing it with `readMessage` splits lines between the two.
    public func receiveRaw(into buffer: UnsafeMutableRawBufferPointer) throws(KVOClientError) -> Int {
        if inboxStart < inbox.count {
            let count = min(buffer.count, inbox.count - inboxStart)
            inbox.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress! + inboxStart, byteCount: count) }
            inboxStart += count
            inboxScanned = inboxStart
            return count
        }
        inbox.removeAll(keepingCapacity: true)
        inboxStart = 0
        inboxScanned = 0
        try fill(deadline: nil)
        return try receiveRaw(into: buffer)
    }

    // MARK: - Requests and events

    /// Sends a request (`op` plus `params`, with a fresh `id`) and returns its reply, queuing any
    /// events that arrive first. The reply is returned whether `ok` is true or false.
    public func request(_ op: String, _ params: [String: JSONValue] = [:], timeout: Double? = 10) throws(KVOClientError) -> JSONValue {
        let id = nextRequestID
        nextRequestID += 1
        var message = params
        message["op"] = .string(op)
        message["id"] = .int(id)
        try send(.object(message))
        while true {
            let incoming = try readMessage(timeout: timeout)
            if incoming["event"] != nil {
                if !KVOConnection.isHeartbeat(incoming) { queuedEvents.append(incoming) }
                continue
            }
            if incoming["id"] == .int(id) { return incoming }
            // A reply without our id (for instance to a line the server could not parse): skip it.
        }
    }

    /// Like `request`, but throws `.server` for an `ok: false` reply and returns the reply's fields. For
    /// `invalid_value` the message ends with ` (property 'L', rule 'max')`, from the error's members.
    @discardableResult
    public func call(_ op: String, _ params: [String: JSONValue] = [:], timeout: Double? = 10) throws(KVOClientError) -> [String: JSONValue] {
        let reply = try request(op, params, timeout: timeout)
        guard let fields = reply.objectValue else { throw .malformedMessage(reply.description) }
        if fields["ok"] == .bool(true) { return fields }
        let error = fields["error"]
        let code = error?["code"]?.stringValue ?? "unknown"
        var message = error?["message"]?.stringValue ?? ""
        // A refused value names its property and rule in members of their own; keep them in the message.
        if code == "invalid_value", let property = error?["property"]?.stringValue, let rule = error?["rule"]?.stringValue {
            message += " (property '\(property)', rule '\(rule)')"
        }
        throw .server(code: code, message: message)
    }

    /// The next change event: a queued one, or the next to arrive within `timeout` seconds
    /// (nil waits forever). Returns nil on timeout. Replies and heartbeats read meanwhile are dropped.
    public func nextEvent(timeout: Double? = 10) throws(KVOClientError) -> JSONValue? {
        if !queuedEvents.isEmpty { return queuedEvents.removeFirst() }
        let deadline = timeout.map { monotonicSeconds() + $0 }
        while true {
            let remaining = deadline.map { max(0, $0 - monotonicSeconds()) }
            let message: JSONValue
            do {
                message = try readMessage(timeout: remaining)
            } catch .timedOut {
                return nil
            }
            if message["event"] != nil, !KVOConnection.isHeartbeat(message) { return message }
        }
    }

    /// Whether `message` is the server's heartbeat to a quiet connection (`{"event":"heartbeat"}`, docs/protocol.md
    /// "Idle connections and heartbeats"): `request` and `nextEvent` skip it (`readMessage` returns it).
    public static func isHeartbeat(_ message: JSONValue) -> Bool { message["event"] == "heartbeat" }

    /// Events received and not yet taken with `nextEvent`.
    public var pendingEvents: [JSONValue] { queuedEvents }
}

/// Seconds on a monotonic clock.
public func monotonicSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}
