import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// What kvod says at start-up about its environment, run as the real binary: a data directory it
/// cannot write (named, in words, not as a raw SQLite error), `--data` with `--in-memory` (a usage
/// error), and an open-file limit below what `--max-connections` needs (raised when the hard limit
/// allows, a warning otherwise, and connections past it refused with a reason and a rate-limited log
/// line).
@Suite("kvod start-up checks")
struct StartupChecksTests {
    /// Runs `body` with `path` made immutable (`chattr +i`: even root cannot create files in it), and
    /// undoes it afterwards. Returns false, running nothing, where chattr is not available or not
    /// permitted (not root, a file system without the attribute).
    private func withImmutable(_ path: String, _ body: () throws -> Void) throws -> Bool {
        guard run("/usr/bin/chattr", ["+i", path]) == 0 || run("/bin/chattr", ["+i", path]) == 0 else {
            print("StartupChecksTests: chattr +i is not available here; the read-only data directory case is not run")
            return false
        }
        defer { _ = run("/usr/bin/chattr", ["-i", path]) == 0 || run("/bin/chattr", ["-i", path]) == 0 }
        try body()
        return true
    }

    private func run(_ executable: String, _ arguments: [String]) -> Int32 {
        guard FileManager.default.isExecutableFile(atPath: executable) else { return -1 }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return -1 }
        process.waitUntilExit()
        return process.terminationStatus
    }

    @Test("a read-only data directory with a database in it: kvod names the directory and says it is not writable")
    func readOnlyDataDirectory() throws {
        let scratch = try TemporaryDirectory("readonly")
        let data = scratch.appending("data")
        let first = try KVODProcess(dataDirectory: data)
        try first.connect().call("create", ["object": "o"])
        expectEqual(first.stop(), 0)
        let ran = try withImmutable(data) {
            let error = #expect(throws: KVODProcessError.self) { _ = try KVODProcess(dataDirectory: data) }
            guard case let .exitedEarly(status, log) = error else { return }
            expectEqual(status, 1)
            #expect(log.contains("cannot use data directory '\(data)': it is not writable"), "\(log)")
            #expect(!log.contains("SQLite error"), "\(log)")
        }
        if ran {
            // Writable again: the data is there.
            let again = try KVODProcess(dataDirectory: data)
            expectEqual(try again.connect().call("list")["objects"], ["o"])
        }
    }

    @Test("a database file that is not a database: kvod names the file")
    func notADatabase() throws {
        let scratch = try TemporaryDirectory("notadb")
        let data = scratch.appending("data")
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        try Data(repeating: 0x41, count: 4096).write(to: URL(fileURLWithPath: data + "/kvod.sqlite3"))
        let error = #expect(throws: KVODProcessError.self) { _ = try KVODProcess(dataDirectory: data) }
        guard case let .exitedEarly(status, log) = error else { return }
        expectEqual(status, 1)
        #expect(log.contains("cannot use the database '\(data)/kvod.sqlite3': it is not a SQLite database"), "\(log)")
    }

    @Test("--data with --in-memory is a usage error (exit 2) naming both flags")
    func dataWithInMemoryIsRefused() throws {
        let scratch = try TemporaryDirectory("inmemory")
        let error = #expect(throws: KVODProcessError.self) {
            _ = try KVODProcess(["--data", scratch.appending("data")], storage: .inMemory)
        }
        guard case let .exitedEarly(status, log) = error else { return }
        expectEqual(status, 2)
        #expect(log.contains("kvod: error: --data '\(scratch.appending("data"))' and --in-memory cannot be used together"), "\(log)")
        #expect(!FileManager.default.fileExists(atPath: scratch.appending("data")))
    }

    @Test("an open-file limit below --max-connections: a warning at start-up, refusals with a reason, one log line per second at most")
    func descriptorLimitBelowMaxConnections() throws {
        let server = try KVODProcess(["--max-connections", "1000"], shellPrefix: "ulimit -n 64")
        #expect(server.waitForLog("the open-file limit (ulimit -n) is 64"), "\(server.log)")
        #expect(server.log.contains("fewer than --max-connections 1000"), "\(server.log)")
        let started = Date()
        var admitted: [KVOConnection] = []
        var refusals = 0
        for _ in 0..<60 {
            let client = try server.connect()
            if let reply = try? client.call("ping", timeout: 5) {
                expectEqual(reply["ok"], true)
                admitted.append(client)
            } else {
                refusals += 1
            }
        }
        // 64 descriptors, 32 kept for kvod itself: at most 32 connections fit.
        #expect(admitted.count <= 32)
        #expect(admitted.count >= 16)
        expectEqual(refusals, 60 - admitted.count)
        let refused = try server.connect()
        let refusal = try refused.readMessage(timeout: 5)
        expectEqual(refusal["error"]?["code"], "too_many_connections")
        expectEqual(refusal["error"]?["message"]?.stringValue?.contains("out of file descriptors"), true, "\(refusal)")
        #expect(server.waitForLog("for want of file descriptors"), "\(server.log)")
        let seconds = Date().timeIntervalSince(started)
        let lines = server.log.split(separator: "\n").filter { $0.contains("for want of file descriptors") }
        #expect(lines.count <= Int(seconds) + 1, "one line a second at most: \(lines)")
        // The server keeps serving the admitted ones, and a freed descriptor admits a newcomer.
        try admitted[0].call("ping")
        admitted.removeLast().close()
        let deadline = Date().addingTimeInterval(5)
        var newcomerAdmitted = false
        while Date() < deadline, !newcomerAdmitted {
            newcomerAdmitted = (try? server.connect().call("ping", timeout: 2)) != nil
            if !newcomerAdmitted { refusals += 1; usleep(20_000) }
        }
        #expect(newcomerAdmitted)
        expectEqual(server.stop(), 0)
        // Every refusal is counted in some line: the first at once, the rest by the following lines
        // or, for the tail, at shutdown ("refused N more connections").
        let reported = server.log.split(separator: "\n").compactMap { line -> Int? in
            guard line.contains("for want of file descriptors"), let range = line.range(of: "refused ") else { return nil }
            return Int(line[range.upperBound...].prefix { $0.isNumber })
        }
        expectEqual(reported.reduce(0, +), refusals + 1, "\(refusals + 1) refused:\n\(server.log)")
    }

    @Test("a soft open-file limit below what --max-connections needs is raised toward the hard limit, without a warning")
    func softDescriptorLimitIsRaised() throws {
        let server = try KVODProcess(["--max-connections", "500"], shellPrefix: "ulimit -Sn 64")
        // Only meaningful where the hard limit allows 532: it does on any usual system (1024 or more).
        let limits = try String(contentsOfFile: "/proc/\(server.process.processIdentifier)/limits", encoding: .utf8)
            .split(separator: "\n").first { $0.hasPrefix("Max open files") }
        #expect(server.waitForLog("raised the open-file limit (ulimit -n) from 64 to 532"), "\(server.log)\n\(limits ?? "")")
        #expect(!server.log.contains("fewer than --max-connections"), "\(server.log)")
        expectEqual(limits?.split(separator: " ", omittingEmptySubsequences: true)[3], "532")
    }
}
