import Foundation

/// Whether a child process has exited, asked of the kernel without reaping it.
///
/// Foundation's `Process` learns of a child's exit on its own manager thread (a SIGCHLD source, then a run
/// loop source). When the whole test run starves its threads (a loaded 2-core CI machine: tests that
/// finished were reported after 116 s), `isRunning` stayed true for more than 20 s after kvod had exited
/// cleanly, and `KVODProcess.stop()` reported a SIGKILL (-1) for a server that had stopped with status 0.
/// `waitid(…, WNOWAIT)` answers at once and leaves the child for Foundation to reap, so `Process` stays
/// consistent. Any thread may call it.
enum ChildExit {
    /// The child's termination status as `Process.terminationStatus` gives it (the exit code, or the signal
    /// that ended it) if it has exited; nil while it runs (or if it is not this process's child any more).
    static func status(of pid: pid_t) -> Int32? {
        var info = siginfo_t()
        let result = waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT)
        guard result == 0, info._sifields._sigchld.si_pid == pid else { return nil }
        return info._sifields._sigchld.si_status
    }

    /// Whether `process` has exited, by Foundation's account or the kernel's.
    static func hasExited(_ process: Process) -> Bool {
        !process.isRunning || status(of: process.processIdentifier) != nil
    }

    /// `process`'s termination status once it has exited: Foundation's when it has noticed, else the kernel's.
    static func terminationStatus(of process: Process) -> Int32? {
        if !process.isRunning { return process.terminationStatus }
        return status(of: process.processIdentifier)
    }
}
