import Foundation
import KVOClientKit
import KVOJSON

/// Where `swift build` put the executables: next to the test bundle.
enum BuiltProducts {
    static var directory: URL {
        // .build/<triple>/debug/kvodPackageTests.xctest (a file on Linux) -> .build/<triple>/debug
        var candidate = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
            candidate = bundle.bundleURL.deletingLastPathComponent()
        }
        return candidate
    }

    static func executable(_ name: String) -> URL {
        let url = directory.appendingPathComponent(name)
        precondition(
            FileManager.default.isExecutableFile(atPath: url.path),
            "\(url.path) is missing: run `swift build` before `swift test` (scripts/test.sh does)")
        return url
    }
}

/// A real `kvod` process on an ephemeral loopback port, for one test.
///
/// Started with `--port 0`; the port is read from the line kvod prints on stdout. `stop()` sends
/// SIGTERM and waits; deinit kills a process a test forgot. stderr (the log) is collected.
final class KVODProcess: @unchecked Sendable {
    let process = Process()
    let port: Int
    private let stderrPipe = Pipe()
    private let stdoutPipe = Pipe()
    private let logLock = NSLock()
    private var logData = Data()

    /// Starts kvod with extra flags and waits until it listens.
    init(_ extraArguments: [String] = [], logLevel: String = "info") throws {
        process.executableURL = BuiltProducts.executable("kvod")
        process.arguments = ["--host", "127.0.0.1", "--port", "0", "--log-level", logLevel] + extraArguments
        process.standardOutput = stdoutPipe
        process.standardError = stderrPipe
        try process.run()
        // First stdout line: "kvod listening on 127.0.0.1:PORT".
        var line = Data()
        let stdoutHandle = stdoutPipe.fileHandleForReading
        while true {
            let byte = stdoutHandle.readData(ofLength: 1)
            if byte.isEmpty {
                let log = (try? stderrPipe.fileHandleForReading.readToEnd()).flatMap { $0 } ?? Data()
                throw KVODProcessError.exitedEarly(log: String(decoding: log, as: UTF8.self))
            }
            if byte.first == 0x0A { break }
            line.append(byte)
        }
        let text = String(decoding: line, as: UTF8.self)
        guard let portText = text.split(separator: ":").last, let port = Int(portText) else {
            throw KVODProcessError.unexpectedBanner(text)
        }
        self.port = port
        // Collect the log from here on (self is fully initialized now).
        let stderrHandle = stderrPipe.fileHandleForReading
        stderrHandle.readabilityHandler = { [weak self] handle in
            let chunk = handle.availableData
            guard let self, !chunk.isEmpty else { return }
            self.logLock.lock()
            self.logData.append(chunk)
            self.logLock.unlock()
        }
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        stderrPipe.fileHandleForReading.readabilityHandler = nil
    }

    /// A new client connection to this server.
    func connect() throws -> KVOConnection {
        try KVOConnection(host: "127.0.0.1", port: port)
    }

    /// Sends `signal` and waits (up to `timeout` seconds) for the exit status.
    @discardableResult
    func stop(signal: Int32 = SIGTERM, timeout: Double = 10) -> Int32 {
        if process.isRunning { kill(process.processIdentifier, signal) }
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { usleep(10_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return -1
        }
        process.waitUntilExit()
        // Let the log reader drain what is left.
        if let rest = try? stderrPipe.fileHandleForReading.readToEnd() {
            logLock.lock()
            logData.append(rest)
            logLock.unlock()
        }
        return process.terminationStatus
    }

    /// Everything kvod logged so far.
    var log: String {
        logLock.lock()
        defer { logLock.unlock() }
        return String(decoding: logData, as: UTF8.self)
    }

    /// Waits until the log contains `text` (or `timeout` passes).
    func waitForLog(_ text: String, timeout: Double = 5) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if log.contains(text) { return true }
            usleep(20_000)
        }
        return log.contains(text)
    }
}

enum KVODProcessError: Error {
    case exitedEarly(log: String)
    case unexpectedBanner(String)
}
