import Foundation
import KVOWireProbe
import KVOJSON

/// Where `swift build` put the executables: next to the test bundle, or `KVOD_TEST_BINARIES` (e.g.
/// `.build/release`, for figures measured on release builds).
enum BuiltProducts {
    static var directory: URL {
        if let override = ProcessInfo.processInfo.environment["KVOD_TEST_BINARIES"], !override.isEmpty {
            return URL(fileURLWithPath: override)
        }
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

/// A real `kvod` process on a loopback port, for one test.
///
/// By default it runs `--in-memory` on an ephemeral port (`--port 0`; the port is read from the line
/// kvod prints on stdout), so tests neither write into the working directory nor share state. With
/// `dataDirectory` (or `storage: .directory`) it persists there instead (`--data DIR`), and
/// `restart` starts a new kvod with the same flags, storage and port, so clients reconnect to the
/// same address. `stop()` sends SIGTERM (or another signal) and waits; deinit kills a process a test
/// forgot. stderr (the log) is collected.
final class KVODProcess: @unchecked Sendable {
    /// Where kvod keeps its state.
    enum Storage: Sendable {
        /// `--in-memory`: nothing persists.
        case inMemory
        /// `--data <path>`.
        case directory(String)
        /// Neither flag: kvod's default data directory, in its working directory.
        case serverDefault

        var arguments: [String] {
            switch self {
            case .inMemory: return ["--in-memory"]
            case let .directory(path): return ["--data", path]
            case .serverDefault: return []
            }
        }
    }

    let process = Process()
    /// The plaintext port (the TLS port when kvod runs with `--port off`).
    let port: Int
    /// The TLS port, when kvod was started with `--tls-port` (kvod prints it on a second stdout line); 0 otherwise.
    let tlsPort: Int
    /// The HTTP listener's port (`--http-port`); 0 without one.
    let httpPort: Int
    let storage: Storage
    /// The flags after the standard ones (host, port, log level, storage).
    let extraArguments: [String]
    let workingDirectory: String?
    let logLevel: String
    private let stderrPipe = ChildPipe()
    private let stdoutPipe = ChildPipe()
    /// kvod's stderr (its log), collected from the banner on (nil until then).
    private var logCollector: PipeCollector?

    /// Starts kvod with extra flags and waits until it listens: on `port` (0: a free one), in
    /// `workingDirectory` (nil: the test's). With `shellPrefix`, kvod is started by `/bin/sh`, which
    /// runs that first (`ulimit -n 64`, say) and then execs kvod. `environment` adds variables to the test's
    /// (`KVOD_…` settings); an empty `logLevel` leaves `--log-level` to them or to a config file.
    init(_ extraArguments: [String] = [], storage: Storage = .inMemory, port: Int = 0,
         workingDirectory: String? = nil, logLevel: String = "info", shellPrefix: String? = nil,
         environment: [String: String] = [:]) throws {
        self.storage = storage
        self.extraArguments = extraArguments
        self.workingDirectory = workingDirectory
        self.logLevel = logLevel
        let arguments = ["--host", "127.0.0.1", "--port", String(port)] + (logLevel.isEmpty ? [] : ["--log-level", logLevel])
            + storage.arguments + extraArguments
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        if let shellPrefix {
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", shellPrefix + #"; exec "$0" "$@""#, BuiltProducts.executable("kvod").path] + arguments
        } else {
            process.executableURL = BuiltProducts.executable("kvod")
            process.arguments = arguments
        }
        if let workingDirectory { process.currentDirectoryURL = URL(fileURLWithPath: workingDirectory) }
        process.standardOutput = stdoutPipe.fileHandleForWriting
        process.standardError = stderrPipe.fileHandleForWriting
        try process.run()
        stdoutPipe.closeWritingEnd()
        stderrPipe.closeWritingEnd()
        // First stdout line: "kvod listening on 127.0.0.1:PORT"; with --tls-port, then (or only, with --port
        // off) "kvod listening for TLS on 127.0.0.1:PORT".
        let stdoutHandle = stdoutPipe.fileHandleForReading
        let stderrForFailure = stderrPipe
        let process = self.process
        func readBannerPort() throws -> (port: Int, isTLS: Bool) {
            var line = Data()
            while true {
                let byte = stdoutHandle.readData(ofLength: 1)
                if byte.isEmpty {
                    process.waitUntilExit()
                    let log = (try? stderrForFailure.fileHandleForReading.readToEnd()).flatMap { $0 } ?? Data()
                    throw KVODProcessError.exitedEarly(status: process.terminationStatus, log: String(decoding: log, as: UTF8.self))
                }
                if byte.first == 0x0A { break }
                line.append(byte)
            }
            let text = String(decoding: line, as: UTF8.self)
            guard let portText = text.split(separator: ":").last, let port = Int(portText) else {
                throw KVODProcessError.unexpectedBanner(text)
            }
            return (port, text.contains("for TLS"))
        }
        let first = try readBannerPort()
        if first.isTLS {
            self.port = first.port
            self.tlsPort = first.port
        } else {
            self.port = first.port
            self.tlsPort = extraArguments.contains("--tls-port") ? try readBannerPort().port : 0
        }
        // Then, with --http-port: "kvod listening for HTTP on 127.0.0.1:PORT".
        self.httpPort = extraArguments.contains("--http-port") ? try readBannerPort().port : 0
        // Collect the log from here on.
        logCollector = PipeCollector(reading: stderrPipe.fileHandleForReading)
    }

    /// Starts kvod persisting into `dataDirectory` (`--data`), with extra flags.
    convenience init(_ extraArguments: [String] = [], dataDirectory: String, port: Int = 0) throws {
        try self.init(extraArguments, storage: .directory(dataDirectory), port: port)
    }

    /// Stops this kvod with `signal` (unless it has exited already) and starts a new one with the
    /// same flags, storage and working directory on the same port. The port was free a moment ago, but another
    /// process may take it in between: binding is retried for up to `timeout` seconds.
    func restart(after signal: Int32 = SIGTERM, timeout: Double = 10) throws -> KVODProcess {
        stop(signal: signal)
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            do {
                return try KVODProcess(
                    extraArguments, storage: storage, port: port, workingDirectory: workingDirectory, logLevel: logLevel)
            } catch let KVODProcessError.exitedEarly(_, log) where log.contains("in use") && Date() < deadline {
                usleep(50_000)
            }
        }
    }

    deinit {
        if !ChildExit.hasExited(process) {
            kill(process.processIdentifier, SIGKILL)
            if !awaitExit(timeout: 10) { reapUnnoticedChild() }
        }
        reportSanitizerFindings()
    }

    /// Waits up to `timeout` seconds for Foundation to see the child exit; never for ever. `waitUntilExit()`
    /// spins until Foundation has reaped the child, and under ThreadSanitizer a SIGKILLed kvod once stayed a
    /// zombie Foundation never reaped: the wait spun on every cooperative thread and starved the whole run.
    private func awaitExit(timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while !ChildExit.hasExited(process), Date() < deadline { usleep(10_000) }
        return ChildExit.hasExited(process)
    }

    /// Reaps a child that was killed but that Foundation did not notice exiting, so that it does not stay a
    /// zombie (`Process` then still says it runs; nothing asks it again).
    private func reapUnnoticedChild() {
        var status: Int32 = 0
        let reaped = waitpid(process.processIdentifier, &status, WNOHANG)
        FileHandle.standardError.write(Data("KVODProcess: kvod pid \(process.processIdentifier) was not seen exiting; waitpid returned \(reaped)\n".utf8))
    }

    /// A kvod built with a sanitizer (scripts/test-tsan.sh builds every target with ThreadSanitizer) writes
    /// its reports to its stderr, which only this object reads: a kvod that halted on a race would otherwise
    /// show only as "the server closed the connection" in some client test. Its whole log goes to the test
    /// process's stderr instead.
    private func reportSanitizerFindings() {
        logCollector?.waitForEnd(timeout: 2)
        let log = self.log
        guard log.contains("ThreadSanitizer") || log.contains("AddressSanitizer") else { return }
        let report = "==== kvod (pid \(process.processIdentifier), port \(port)) reported a sanitizer finding; its log:\n"
            + log + "\n==== end of kvod's log\n"
        FileHandle.standardError.write(Data(report.utf8))
    }

    /// A new client connection to this server.
    func connect() throws -> KVOConnection {
        try KVOConnection(host: "127.0.0.1", port: port)
    }

    /// A connection for a test to inspect the server with (`info`) later: it pings once at once, so that kvod's
    /// `--first-request-timeout` (30 s by default) does not close it while a slow test (ThreadSanitizer, a
    /// loaded machine) is still writing before its first look.
    func connectProbe() throws -> KVOConnection {
        let connection = try connect()
        _ = try connection.call("ping")
        return connection
    }

    /// A new TLS client connection to this server's TLS port.
    func connectTLS(_ options: TLSClientOptions) throws -> KVOConnection {
        try KVOConnection(host: "127.0.0.1", port: tlsPort, tls: options)
    }

    /// Sends `signal` (SIGSTOP, SIGCONT, …) without waiting.
    func send(signal: Int32) {
        if !ChildExit.hasExited(process) { kill(process.processIdentifier, signal) }
    }

    /// Sends `signal` and waits (up to `timeout` seconds) for the exit status.
    @discardableResult
    /// Exit is judged by `ChildExit` (the kernel's word), not only by Foundation's `isRunning`, which a
    /// starved test run updates late.
    func stop(signal: Int32 = SIGTERM, timeout: Double = 10) -> Int32 {
        if !ChildExit.hasExited(process) { kill(process.processIdentifier, signal) }
        guard awaitExit(timeout: timeout) else {
            kill(process.processIdentifier, SIGKILL)
            if !awaitExit(timeout: 10) { reapUnnoticedChild() }
            return -1
        }
        // Let the log collector read what is left.
        logCollector?.waitForEnd(timeout: 5)
        // Never a kill here: a child Foundation reaped may have left its pid to another process.
        return ChildExit.terminationStatus(of: process) ?? -1
    }

    /// Everything kvod logged so far.
    var log: String {
        String(decoding: logCollector?.bytes ?? Data(), as: UTF8.self)
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

/// Why a kvod did not start.
enum KVODProcessError: Error {
    /// kvod exited before printing where it listens; its status and what it logged.
    case exitedEarly(status: Int32, log: String)
    /// The first stdout line did not end in a port number.
    case unexpectedBanner(String)
}

/// A fresh directory under the system's temporary directory, removed with everything in it when
/// the value goes away: a private kvod data directory for one test.
final class TemporaryDirectory: @unchecked Sendable {
    let path: String

    /// Creates `<tmp>/kvod-<label>-XXXXXX`.
    init(_ label: String = "test") throws {
        var template = Array((NSTemporaryDirectory() as NSString).appendingPathComponent("kvod-\(label)-XXXXXX").utf8CString)
        let created = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        guard created != nil else { throw CocoaError(.fileWriteUnknown) }
        path = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// A path inside the directory (not created).
    func appending(_ name: String) -> String {
        (path as NSString).appendingPathComponent(name)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }
}
