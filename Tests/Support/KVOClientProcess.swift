import Foundation
import Testing

/// The built `kvoclient` binary run as a child process, for the CLI tests.
///
/// `run` executes one command to completion and returns its exit status and output; `start` leaves
/// it running (for `subscribe`) so that a test can read its stdout line by line with a timeout,
/// signal it and wait for it to exit. A process still running at deinit is killed.
final class KVOClientProcess: @unchecked Sendable {
    /// What a finished command did.
    struct Result {
        /// Exit status, or the signal number when `exitedNormally` is false.
        var status: Int32
        var exitedNormally: Bool
        var stdout: String
        var stderr: String

        /// stdout split into lines, without the final empty one.
        var lines: [String] {
            var parts = stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            if parts.last == "" { parts.removeLast() }
            return parts
        }

        /// stderr split into lines, without the final empty one.
        var errorLines: [String] {
            var parts = stderr.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            if parts.last == "" { parts.removeLast() }
            return parts
        }
    }

    let process = Process()
    /// The child's stdin when started with `writableStandardInput` (`sendLine`); /dev/null otherwise.
    private let stdinPipe: ChildPipe?
    private let stdoutPipe = ChildPipe()
    private let stderrPipe = ChildPipe()
    private var stdout: PipeLines
    private var stderr: PipeLines

    /// Starts `kvoclient` with `arguments` (connection flags included by the caller). With
    /// `ignoringSIGPIPE`, it starts through `/bin/sh` with SIGPIPE ignored, as some parents do.
    /// `environment` is added to the test's own (KVOD_PASSWORD and KVOD_TOKEN are never inherited).
    /// `executable` names another built product (the examples); with `writableStandardInput` the test
    /// writes the child's stdin with `sendLine`.
    init(_ arguments: [String], ignoringSIGPIPE: Bool = false, environment: [String: String] = [:],
         executable name: String = "kvoclient", writableStandardInput: Bool = false) throws {
        stdout = PipeLines(stdoutPipe.fileHandleForReading)
        stderr = PipeLines(stderrPipe.fileHandleForReading)
        stdinPipe = writableStandardInput ? ChildPipe() : nil
        let executable = BuiltProducts.executable(name)
        if ignoringSIGPIPE {
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", #"trap '' PIPE; exec "$0" "$@""#, executable.path] + arguments
        } else {
            process.executableURL = executable
            process.arguments = arguments
        }
        process.standardOutput = stdoutPipe.fileHandleForWriting
        process.standardError = stderrPipe.fileHandleForWriting
        process.standardInput = stdinPipe?.fileHandleForReading ?? FileHandle.nullDevice
        var inherited = ProcessInfo.processInfo.environment
        inherited.removeValue(forKey: "KVOD_PASSWORD")
        inherited.removeValue(forKey: "KVOD_TOKEN")
        process.environment = inherited.merging(environment) { $1 }
        try process.run()
        stdoutPipe.closeWritingEnd()
        stderrPipe.closeWritingEnd()
        try? stdinPipe?.fileHandleForReading.close()
    }

    /// Writes `line` and a newline to the child's stdin (started with `writableStandardInput`).
    func sendLine(_ line: String = "") {
        stdinPipe?.fileHandleForWriting.write(Data((line + "\n").utf8))
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// Starts `kvoclient --port <port> <arguments>` against a test server.
    static func start(_ server: KVODProcess, _ arguments: [String], ignoringSIGPIPE: Bool = false,
                      environment: [String: String] = [:]) throws -> KVOClientProcess {
        try KVOClientProcess(["--port", String(server.port)] + arguments, ignoringSIGPIPE: ignoringSIGPIPE, environment: environment)
    }

    /// Runs `kvoclient --port <port> <arguments>` to completion.
    static func run(_ server: KVODProcess, _ arguments: [String], timeout: Double = 20,
                    environment: [String: String] = [:]) throws -> Result {
        try run(["--port", String(server.port)] + arguments, timeout: timeout, environment: environment)
    }

    /// Runs `kvoclient <arguments>` to completion (killed, and the test failed, after `timeout` s).
    static func run(_ arguments: [String], timeout: Double = 20, environment: [String: String] = [:]) throws -> Result {
        let child = try KVOClientProcess(arguments, environment: environment)
        return child.finish(timeout: timeout)
    }

    /// The next stdout line (without its newline), or nil if none arrives within `timeout` seconds
    /// or stdout closes first.
    func nextLine(timeout: Double = 10) -> String? {
        stdout.nextLine(timeout: timeout)
    }

    /// The next stderr line (without its newline), or nil if none arrives within `timeout` seconds
    /// or stderr closes first: for the notes `subscribe` prints about its connection.
    func nextErrorLine(timeout: Double = 10) -> String? {
        stderr.nextLine(timeout: timeout)
    }

    /// Closes the test's end of the stdout pipe, as `head` does once it has its lines.
    func closeStdout() {
        stdout.close()
    }

    /// Sends `signal` to the process.
    func send(signal: Int32) {
        kill(process.processIdentifier, signal)
    }

    /// Waits for the process to exit (killing it, and recording a test failure, after `timeout`
    /// seconds) and returns its status and the output not yet read with `nextLine` and
    /// `nextErrorLine`.
    func finish(timeout: Double = 20, sourceLocation: SourceLocation = #_sourceLocation) -> Result {
        let deadline = Date().addingTimeInterval(timeout)
        while !stdout.isClosed, deadline.timeIntervalSinceNow > 0 {
            stdout.read(waitingAtMost: deadline.timeIntervalSinceNow)
        }
        while !ChildExit.hasExited(process), deadline.timeIntervalSinceNow > 0 { usleep(5_000) }
        if !ChildExit.hasExited(process) {
            Issue.record("kvoclient \(process.arguments ?? []) still running after \(timeout) s: killed", sourceLocation: sourceLocation)
            kill(process.processIdentifier, SIGKILL)
        }
        process.waitUntilExit()
        while !stdout.isClosed { stdout.read(waitingAtMost: 1) }
        while !stderr.isClosed { stderr.read(waitingAtMost: 1) }
        return Result(
            status: process.terminationStatus,
            exitedNormally: process.terminationReason == .exit,
            stdout: stdout.takeRest(),
            stderr: stderr.takeRest())
    }
}

/// The read end of a child's output pipe, split into lines as they arrive.
private struct PipeLines {
    private let handle: FileHandle
    private var pending: [UInt8] = []
    private(set) var isClosed = false

    init(_ handle: FileHandle) {
        self.handle = handle
    }

    /// The next line (without its newline), or nil if none arrives within `timeout` seconds or the
    /// pipe closes first.
    mutating func nextLine(timeout: Double) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let newline = pending.firstIndex(of: 0x0A) {
                let line = String(decoding: pending[..<newline], as: UTF8.self)
                pending.removeFirst(newline + 1)
                return line
            }
            if isClosed { return nil }
            let remaining = deadline.timeIntervalSinceNow
            if remaining <= 0 { return nil }
            read(waitingAtMost: remaining)
        }
    }

    /// Closes the pipe's read end.
    mutating func close() {
        try? handle.close()
        isClosed = true
    }

    /// Everything received and not yet returned as a line.
    mutating func takeRest() -> String {
        defer { pending.removeAll() }
        return String(decoding: pending, as: UTF8.self)
    }

    /// Reads what the pipe has, waiting up to `seconds` for something to arrive.
    mutating func read(waitingAtMost seconds: Double) {
        let descriptor = handle.fileDescriptor
        var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        let ready = poll(&poller, 1, Int32(max(1, min(seconds, 60) * 1000)))
        guard ready > 0 else { return }
        var chunk = [UInt8](repeating: 0, count: 4096)
        let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
        if count > 0 {
            pending.append(contentsOf: chunk[..<count])
        } else if count == 0 || errno != EINTR {
            isClosed = true
        }
    }
}
