import Foundation

@testable import KVOTestSupport

/// An `openssl s_client` process connected to kvod's TLS port: an independent TLS implementation's client
/// (interop), which can also send a TLS 1.3 KeyUpdate ("K" line), renegotiate ("R" line, TLS 1.2) and save
/// or resume sessions. Lines written to its stdin go to the server; everything it prints (stdout and
/// stderr together) is collected for `waitForOutput`.
final class OpenSSLClient: @unchecked Sendable {
    let process = Process()
    /// Our copy of its stdin's read end stays open, so writing after s_client exited never raises SIGPIPE.
    private let input = ChildPipe()
    private let output = ChildPipe()
    private var collector: PipeCollector?

    /// Starts `openssl s_client -connect 127.0.0.1:PORT` with `arguments` added.
    init(port: Int, arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl", "s_client", "-connect", "127.0.0.1:\(port)"] + arguments
        process.standardInput = input.fileHandleForReading
        process.standardOutput = output.fileHandleForWriting
        process.standardError = output.fileHandleForWriting
        try process.run()
        output.closeWritingEnd()
        collector = PipeCollector(reading: output.fileHandleForReading)
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// Everything printed so far.
    var text: String {
        String(decoding: collector?.bytes ?? Data(), as: UTF8.self)
    }

    /// Sends one line (a request, or an s_client command such as "K").
    func send(_ line: String) {
        try? input.fileHandleForWriting.write(contentsOf: Data((line + "\n").utf8))
    }

    /// Waits until the output contains `needle` `count` times (or `timeout` passes).
    func waitForOutput(_ needle: String, count: Int = 1, timeout: Double = 10) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if text.components(separatedBy: needle).count - 1 >= count { return true }
            usleep(20_000)
        }
        return text.components(separatedBy: needle).count - 1 >= count
    }

    /// Waits for the process to exit (up to `timeout` seconds); true when it did.
    func waitForExit(timeout: Double = 10) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while !ChildExit.hasExited(process), Date() < deadline { usleep(20_000) }
        return ChildExit.hasExited(process)
    }

    /// Kills the process: its TCP connection ends without a close_notify.
    func killAbruptly() {
        if process.isRunning { Foundation.kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}
