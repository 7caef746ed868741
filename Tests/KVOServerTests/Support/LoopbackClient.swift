import Foundation
import KVOJSON

/// A plain TCP connection to a `ServerThread`'s listener on 127.0.0.1, for the server's tests that go through
/// its sockets (`ServerLifecycleTests`, `OperationTableOverServerTests`, `StorageRefusalOverServerTests`): sends
/// bytes as they are and reads lines, each within 10 s. Not KVOWireProbe's `KVOConnection`, so that this target
/// does not depend on the client library (KVOWireProbe's TLS is KVOClient's): a change to the client does not
/// rebuild the server's tests. Test thread only; the socket is closed with the value.
final class LoopbackClient {
    private let descriptor: Int32
    /// Bytes received and not yet returned as a line.
    private var received: [UInt8] = []

    init(port: Int) throws(LoopbackClientError) {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw LoopbackClientError(operation: "socket") }
        // A read that waits longer fails with EAGAIN: a missing reply fails the test instead of hanging it.
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard status == 0 else {
            let error = LoopbackClientError(operation: "connect to port \(port)")
            close(descriptor)
            throw error
        }
    }

    deinit { close(descriptor) }

    /// Sends `bytes` as they are (a line needs its own newline).
    func send(raw bytes: [UInt8]) throws(LoopbackClientError) {
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { throw LoopbackClientError(operation: "send") }
            offset += count
        }
    }

    /// The next line (a reply or an event), parsed.
    func readMessage() throws -> JSONValue {
        while true {
            if let newline = received.firstIndex(of: 0x0A) {
                let line = Array(received[..<newline])
                received.removeSubrange(...newline)
                return try JSONParser.parse(line)
            }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { throw LoopbackClientError(operation: count == 0 ? "read (the server closed the connection)" : "read") }
            received.append(contentsOf: chunk[..<count])
        }
    }

    /// Sends `op` with `params` and returns its reply (the events before it are skipped); throws unless it is `ok`.
    @discardableResult
    func call(_ op: String, _ params: [String: JSONValue] = [:]) throws -> JSONValue {
        var request = params
        request["op"] = .string(op)
        try send(raw: JSONWriter.bytes(.object(request)) + [0x0A])
        var reply = try readMessage()
        while reply["ok"] == nil { reply = try readMessage() }
        guard reply["ok"] == .bool(true) else { throw LoopbackClientError(operation: "\(op): \(reply)") }
        return reply
    }
}

/// What failed in a `LoopbackClient`, with `errno`'s text when a system call did.
struct LoopbackClientError: Error, CustomStringConvertible {
    let description: String

    init(operation: String, code: Int32 = errno) {
        description = code == 0 ? operation : "\(operation): \(String(cString: strerror(code)))"
    }
}
