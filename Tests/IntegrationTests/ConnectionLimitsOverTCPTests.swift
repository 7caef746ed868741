import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Issue 11, per-connection limits: `--max-observations-per-connection` refuses `observe` past it with
/// `too_many_observations`, and `--max-pending-requests` bounds what a client that pipelines requests
/// without reading the replies makes kvod hold, by back-pressure: kvod stops reading the connection
/// while that many replies wait to be written, and the client, once it reads, gets every reply in
/// order, never a close.
@Suite("connection limits over TCP")
struct ConnectionLimitsOverTCPTests {
    @Test("observe past --max-observations-per-connection is too_many_observations; other connections are not affected")
    func observationsPerConnection() throws {
        let server = try KVODProcess(["--max-observations-per-connection", "3"])
        let client = try server.connect()
        let other = try server.connect()
        try client.call("create", ["object": "o", "values": ["a": 1]])
        var subs: [JSONValue] = []
        for keyPath in ["a", "b", "c"] {
            subs.append(try #require(try client.call("observe", ["object": "o", "keyPath": .string(keyPath)])["sub"]))
        }
        let refused = try client.request("observe", ["object": "o", "keyPath": "d"])
        expectError(refused, code: "too_many_observations")
        expectEqual(refused["error"]?["limit"], 3, "\(refused)")
        expectEqual(refused["error"]?["message"]?.stringValue?.contains("--max-observations-per-connection"), true, "\(refused)")
        expectError(try client.request("observe", ["object": "o", "keyPath": "d", "sinceRev": 0]), code: "too_many_observations",
                    "resuming")
        expectEqual(try client.call("info", ["object": "o"])["observers"]?.arrayValue?.count, 3)
        // Another connection has its own count; unobserving makes room again.
        _ = try other.call("observe", ["object": "o", "keyPath": "a"])
        expectEqual(try client.call("unobserve", ["sub": subs[0]])["removed"], true)
        _ = try client.call("observe", ["object": "o", "keyPath": "d", "options": ["new"]])
        try client.call("set", ["object": "o", "keyPath": "d", "value": 2])
        expectEqual(try client.nextEvent()?["change"]?["new"], 2)
    }

    @Test("a client pipelining without reading is held by back-pressure, never closed, and gets every reply in order",
          arguments: [false, true])
    func pipeliningWithoutReading(durable: Bool) throws {
        let directory = try TemporaryDirectory("back-pressure")
        // Replies to 8,000 gets of a 1,000-byte value are 8.3 MB: more than the 1 MiB output buffer and
        // the kernel's socket buffers together (the client's receive buffer is fixed at 32 KiB), so
        // without back-pressure the connection is closed as a slow consumer.
        let arguments = ["--max-pending-requests", "16", "--max-output-buffer", "1048576", "--max-object-bytes", "400000"]
        let server = durable ? try KVODProcess(arguments, dataDirectory: directory.appending("data")) : try KVODProcess(arguments)
        try server.connect().call("create", ["object": "o", "values": ["v": .string(String(repeating: "v", count: 1000)), "n": 0]])
        let client = try SmallBufferClient(port: server.port, receiveBuffer: 32 << 10)
        let requestCount = 12_000
        var bytes: [UInt8] = []
        for id in 1...requestCount {
            let request: JSONValue = id % 3 == 0
                ? ["op": "set", "id": .int(Int64(id)), "object": "o", "keyPath": "n", "value": .int(Int64(id))]
                : ["op": "get", "id": .int(Int64(id)), "object": "o", "keyPath": "v"]
            bytes += JSONWriter.bytes(request)
            bytes.append(0x0A)
        }
        let sender = client.sendInBackground(bytes)
        // The client reads nothing for a while: kvod must hold it off rather than buffer it all or close it.
        // Time is what this proves: a span of real time without reading, against the real kvod.
        Thread.sleep(forTimeInterval: 1.5)
        var lastRevision: Int64 = 0
        for id in 1...requestCount {
            let reply = try client.readMessage()
            guard reply["id"] == .int(Int64(id)), reply["ok"] == true else {
                Issue.record("reply \(id): \(reply)")
                break
            }
            if id % 3 == 0 {
                let rev = try #require(reply["rev"]?.intValue)
                #expect(lastRevision == 0 || rev == lastRevision + 1, "\(reply)")
                lastRevision = rev
            } else if reply["value"]?.stringValue?.utf8.count != 1000 {
                Issue.record("reply \(id) does not carry the value: \(reply)")
                break
            }
        }
        #expect(sender.waitUntilSent(), "the request bytes were not all sent")
        expectEqual(try server.connect().call("get", ["object": "o", "keyPath": "n"])["value"], .int(Int64(requestCount)))
        #expect(!server.log.contains("connection closed"), "\(server.log)")
    }
}

/// A client socket with a small fixed receive buffer (no kernel autotuning, so the server cannot
/// park megabytes of replies in the kernel), sending from a thread of its own while the test's
/// thread reads: a client that writes without reading.
private final class SmallBufferClient: @unchecked Sendable {
    private let descriptor: Int32
    private var inbox: [UInt8] = []
    private var inboxStart = 0

    init(port: Int, receiveBuffer: Int32) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw KVOClientError.io("socket") }
        var size = receiveBuffer
        setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard status == 0 else {
            close(descriptor)
            throw KVOClientError.io("connect: \(String(cString: strerror(errno)))")
        }
    }

    deinit { close(descriptor) }

    /// Sends `bytes` (blocking) from a new thread.
    func sendInBackground(_ bytes: [UInt8]) -> SendCompletion {
        let completion = SendCompletion()
        let descriptor = self.descriptor
        Thread.detachNewThread {
            var sent = 0
            while sent < bytes.count {
                let result = bytes.withUnsafeBytes { send(descriptor, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
                if result < 0 && errno == EINTR { continue }
                if result <= 0 { break }
                sent += result
            }
            completion.finish(allSent: sent == bytes.count)
        }
        return completion
    }

    /// The next line, parsed (waits up to 30 s for it).
    func readMessage() throws -> JSONValue {
        while true {
            if let newline = inbox[inboxStart...].firstIndex(of: 0x0A) {
                let line = Array(inbox[inboxStart..<newline])
                inboxStart = newline + 1
                if inboxStart > 65536 {
                    inbox.removeFirst(inboxStart)
                    inboxStart = 0
                }
                return try JSONParser.parse(line)
            }
            var descriptorState = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptorState, 1, 30_000) == 1 else { throw KVOClientError.timedOut }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { throw KVOClientError.connectionClosed }
            inbox += chunk[..<count]
        }
    }
}

/// Whether a background send finished, and sent everything.
private final class SendCompletion: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var allSent = false

    func finish(allSent: Bool) {
        lock.lock()
        self.allSent = allSent
        lock.unlock()
        done.signal()
    }

    /// Waits (up to 30 s) for the send to finish; true when every byte was sent.
    func waitUntilSent() -> Bool {
        guard done.wait(timeout: .now() + 30) == .success else { return false }
        lock.lock()
        defer { lock.unlock() }
        return allSent
    }
}
