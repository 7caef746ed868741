import Foundation

/// Whether a child process has exited, asked of the kernel without reaping it.
///
/// Foundation's `Process` learns of a child's exit in two steps: its SIGCHLD handler reaps the child
/// (`waitpid`), then a run loop source on Foundation's manager thread sets `isRunning` to false. When the
/// whole test run starves its threads (a loaded 2-core CI machine: a test that took 1 s was reported after
/// 128 s), `isRunning` stayed true for more than 20 s after a child had exited, whether or not it had been
/// reaped yet: `KVODProcess.stop()` reported a SIGKILL (-1) for a kvod that had stopped with status 0, and
/// `KVOClientProcess.finish` a kvoclient that had exited 0 as hung. `waitid(…, WNOWAIT)` answers at once:
/// a child not yet reaped is reported with its status and left for Foundation to reap, and one Foundation
/// has reaped already is no child of ours any more (`ECHILD`), so it has exited too. Any thread may call it.
enum ChildExit {
    /// What the kernel says of a child.
    enum State: Equatable {
        case running
        /// Exited, not yet reaped: its status as `Process.terminationStatus` gives it (the exit code, or the
        /// signal that ended it).
        case exited(Int32)
        /// Reaped already (by Foundation): exited, its status kept by `Process` once it notices.
        case reaped
    }

    static func state(of pid: pid_t) -> State {
        var info = siginfo_t()
        while true {
            if waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 {
                return info._sifields._sigchld.si_pid == pid ? .exited(info._sifields._sigchld.si_status) : .running
            }
            if errno == EINTR { continue }
            return .reaped
        }
    }

    /// The status of a child that exited and was not reaped yet; nil otherwise.
    static func status(of pid: pid_t) -> Int32? {
        if case let .exited(status) = state(of: pid) { return status }
        return nil
    }

    /// Whether `process` (started) has exited, by Foundation's account or the kernel's.
    static func hasExited(_ process: Process) -> Bool {
        !process.isRunning || state(of: process.processIdentifier) != .running
    }

    /// `process`'s termination status once it has exited (nil while it runs): Foundation's when it has
    /// noticed; the kernel's when the child is not reaped yet; when Foundation reaped it but has not said so,
    /// Foundation's once it does (waiting for that, at most `timeout` seconds: nil after).
    static func terminationStatus(of process: Process, timeout: Double = 120) -> Int32? {
        if !process.isRunning { return process.terminationStatus }
        switch state(of: process.processIdentifier) {
        case .running: return nil
        case let .exited(status): return status
        case .reaped:
            let deadline = Date().addingTimeInterval(timeout)
            while process.isRunning, Date() < deadline { usleep(10_000) }
            return process.isRunning ? nil : process.terminationStatus
        }
    }
}
