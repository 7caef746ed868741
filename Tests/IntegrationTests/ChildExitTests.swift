import Foundation
import Testing

@testable import KVOTestSupport

/// `ChildExit`, which `KVODProcess.stop()` trusts over Foundation's late `isRunning`: it must report a
/// running child as running, an exited one with its exit code or signal, and never reap it (Foundation's
/// `Process` reaps its own children; a child started here with posix_spawn shows that a second look still
/// finds it, and that waitpid then gets the same status).
@Suite("child exit, asked of the kernel")
struct ChildExitTests {
    private func spawn(_ script: String) throws -> pid_t {
        var pid: pid_t = 0
        let arguments = ["/bin/sh", "-c", script]
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let result = posix_spawn(&pid, "/bin/sh", nil, nil, &argv, environ)
        guard result == 0 else { throw POSIXError(POSIXErrorCode(rawValue: result) ?? .EINVAL) }
        return pid
    }

    private func statusWhenExited(_ pid: pid_t, timeout: Double = 30) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let status = ChildExit.status(of: pid) { return status }
            usleep(5_000)
        }
        return nil
    }

    @Test("a running child is running; an exit code and a signal are reported, and the child is left unreaped")
    func reportsWithoutReaping() throws {
        let sleeper = try spawn("sleep 30")
        #expect(ChildExit.status(of: sleeper) == nil && ChildExit.state(of: sleeper) == .running)
        kill(sleeper, SIGKILL)
        expectEqual(statusWhenExited(sleeper), SIGKILL)
        expectEqual(ChildExit.status(of: sleeper), SIGKILL, "a second look finds it: it was not reaped")
        var status: Int32 = 0
        #expect(waitpid(sleeper, &status, 0) == sleeper && status & 0x7f == SIGKILL)
        expectEqual(ChildExit.state(of: sleeper), .reaped, "reaped: not this process's child any more, so it has exited")

        let exiting = try spawn("exit 3")
        expectEqual(statusWhenExited(exiting), 3)
        expectEqual(ChildExit.status(of: exiting), 3)
        #expect(waitpid(exiting, &status, 0) == exiting && (status >> 8) & 0xff == 3)
    }

    @Test("with Foundation's Process: hasExited and terminationStatus agree with Process once it has reaped")
    func agreesWithFoundation() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "read line; exit 4"]
        let input = Pipe()
        process.standardInput = input
        try process.run()
        #expect(!ChildExit.hasExited(process))
        expectEqual(ChildExit.terminationStatus(of: process), nil)
        try input.fileHandleForWriting.close()
        let deadline = Date().addingTimeInterval(30)
        while !ChildExit.hasExited(process), Date() < deadline { usleep(5_000) }
        expectEqual(ChildExit.terminationStatus(of: process), 4)
        process.waitUntilExit()
        #expect(ChildExit.hasExited(process) && ChildExit.terminationStatus(of: process) == 4)
    }
}
