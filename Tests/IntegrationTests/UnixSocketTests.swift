import Foundation
import KVOJSON
import Testing

@testable import KVOTestSupport

/// `--unix PATH` against the real kvod binary over a real Unix-domain socket: the protocol works on it,
/// the file is created 0600 (or `--unix-mode`), removed on SIGTERM, a stale file is replaced, and a
/// second kvod on a live path is refused with a clear message.
@Suite("Unix-domain socket listener")
struct UnixSocketTests {
    /// A blocking client on a Unix socket: one request line out, one reply line back.
    final class UnixLineClient {
        let descriptor: Int32
        private var buffer: [UInt8] = []

        init(path: String) throws {
            descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { raw in
                path.utf8CString.withUnsafeBytes { raw.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0.prefix(raw.count - 1))) }
            }
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let status = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            guard status == 0 else {
                close(descriptor)
                throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
            }
        }

        deinit { close(descriptor) }

        func call(_ line: String) throws -> JSONValue {
            let bytes = Array(line.utf8) + [0x0A]
            _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            while true {
                if let newline = buffer.firstIndex(of: 0x0A) {
                    let reply = Array(buffer[..<newline])
                    buffer.removeSubrange(...newline)
                    return try JSONParser.parse(String(decoding: reply, as: UTF8.self))
                }
                var chunk = [UInt8](repeating: 0, count: 4096)
                let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                guard count > 0 else { throw POSIXError(.ECONNRESET) }
                buffer += chunk[..<count]
            }
        }
    }

    private func mode(of path: String) -> mode_t? {
        var status = stat()
        guard lstat(path, &status) == 0 else { return nil }
        return status.st_mode & 0o7777
    }

    @Test("the protocol over --unix; the file is 0600, gone after SIGTERM; a second kvod on the live path is refused")
    func servesRefusesAndCleansUp() throws {
        let scratch = try TemporaryDirectory("unix")
        let path = scratch.appending("kvod.sock")
        let server = try KVODProcess(["--unix", path])
        expectEqual(mode(of: path), 0o600)
        let client = try UnixLineClient(path: path)
        let hello = try client.call(#"{"op":"hello","id":1}"#)
        expectEqual(hello["id"], 1)
        expectEqual(hello["server"], "kvod")
        expectEqual(try client.call(#"{"op":"create","id":2,"object":"o","values":{"v":1}}"#)["rev"], 1)
        // The TCP listener serves the same data.
        expectEqual(try server.connect().call("get", ["object": "o", "keyPath": "v"])["value"], 1)
        expectEqual(try client.call(#"{"op":"get","id":3,"object":"nobody"}"#)["error"]?["code"], "not_found")

        let error = #expect(throws: KVODProcessError.self) { _ = try KVODProcess(["--unix", path]) }
        if case let .exitedEarly(status, log) = error {
            expectEqual(status, 1)
            #expect(log.contains("another process is listening on '\(path)'"), "\(log)")
        }
        #expect(FileManager.default.fileExists(atPath: path), "the refused kvod left the live socket alone")
        expectEqual(try client.call(#"{"op":"ping","id":4}"#)["ok"], true)

        expectEqual(server.stop(), 0)
        #expect(!FileManager.default.fileExists(atPath: path), "the socket file is removed on a clean stop")
    }

    @Test("a stale socket file is replaced; --unix-mode sets the mode; a file that is no socket, or a missing directory, is refused")
    func staleFileModeAndNotASocket() throws {
        let scratch = try TemporaryDirectory("unixstale")
        let path = scratch.appending("kvod.sock")
        // A socket file nothing listens on: bound, then closed without removing it (as after a crash).
        let stale = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            path.utf8CString.withUnsafeBytes { raw.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0.prefix(raw.count - 1))) }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(stale, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        expectEqual(bound, 0)
        close(stale)
        #expect(FileManager.default.fileExists(atPath: path))

        let server = try KVODProcess(["--unix", path, "--unix-mode", "0660"])
        expectEqual(mode(of: path), 0o660)
        expectEqual(try UnixLineClient(path: path).call(#"{"op":"ping","id":1}"#)["ok"], true)
        expectEqual(server.stop(), 0)
        #expect(!FileManager.default.fileExists(atPath: path))

        let plainFile = scratch.appending("not-a-socket")
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: plainFile))
        let error = #expect(throws: KVODProcessError.self) { _ = try KVODProcess(["--unix", plainFile]) }
        if case let .exitedEarly(status, log) = error {
            expectEqual(status, 1)
            #expect(log.contains("exists and is not a socket"), "\(log)")
        }
        expectEqual(try String(contentsOfFile: plainFile, encoding: .utf8), "keep me")
        // A directory that does not exist: refused at start-up, naming the path.
        let nowhere = scratch.appending("missing/kvod.sock")
        let missing = #expect(throws: KVODProcessError.self) { _ = try KVODProcess(["--unix", nowhere]) }
        if case let .exitedEarly(status, log) = missing {
            expectEqual(status, 1)
            #expect(log.contains("unix:\(nowhere)"), "\(log)")
            #expect(log.contains("the directory '\(scratch.appending("missing"))' does not exist"), "\(log)")
            #expect(!log.lowercased().contains("permission"), "a missing directory is not a permission problem: \(log)")
        }
    }

    @Test("a clean stop leaves alone a socket another kvod bound at the same path after this one's file was deleted")
    func stopLeavesAnotherServersSocket() throws {
        let scratch = try TemporaryDirectory("unixtwo")
        let path = scratch.appending("kvod.sock")
        let first = try KVODProcess(["--unix", path])
        expectEqual(unlink(path), 0)
        let second = try KVODProcess(["--unix", path])
        expectEqual(try UnixLineClient(path: path).call(#"{"op":"ping","id":1}"#)["ok"], true)

        expectEqual(first.stop(), 0)
        #expect(FileManager.default.fileExists(atPath: path), "the first kvod's stop left the second one's socket")
        expectEqual(try UnixLineClient(path: path).call(#"{"op":"ping","id":2}"#)["ok"], true)
        expectEqual(second.stop(), 0)
        #expect(!FileManager.default.fileExists(atPath: path), "the second kvod removed its own socket")
    }

    @Test("--unix alone (--port off) serves, with no users and no --insecure-open: a Unix socket counts as loopback")
    func unixAloneIsLoopback() throws {
        let scratch = try TemporaryDirectory("unixalone")
        let path = scratch.appending("kvod.sock")
        let process = Process()
        process.executableURL = BuiltProducts.executable("kvod")
        process.arguments = ["--host", "0.0.0.0", "--port", "off", "--unix", path, "--in-memory", "--log-level", "error"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer {
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
        }
        var client: UnixLineClient?
        for _ in 0..<200 where client == nil {
            client = try? UnixLineClient(path: path)
            if client == nil { usleep(25_000) }
        }
        let connected = try #require(client, "kvod did not listen on \(path)")
        expectEqual(try connected.call(#"{"op":"ping","id":1}"#)["ok"], true)
        process.terminate()
        process.waitUntilExit()
        expectEqual(process.terminationStatus, 0)
        #expect(!FileManager.default.fileExists(atPath: path))
    }
}
