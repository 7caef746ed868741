#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Set to a signal number by the handler that `InterruptFlag.install()` registers.
///
/// A plain global written only by the signal handler and read by the main thread's poll loop: the
/// async-signal-safe pattern C programs use with a `volatile sig_atomic_t`.
nonisolated(unsafe) private var receivedSignal: Int32 = 0

/// Turns SIGINT and SIGTERM into a flag that a polling loop checks, so that Ctrl-C ends a
/// long-running command cleanly (exit 0, no crash report) instead of killing the process.
enum InterruptFlag {
    /// Installs the handlers and unblocks both signals (a parent may have spawned us with them
    /// blocked, as Foundation's `Process` does from a thread that blocks signals). Blocking calls in
    /// progress see `EINTR` and keep waiting, so the loop notices the flag at its next timeout.
    static func install() {
        var signals = sigset_t()
        sigemptyset(&signals)
        for signalNumber in [SIGINT, SIGTERM] {
            signal(signalNumber) { number in receivedSignal = number }
            sigaddset(&signals, signalNumber)
        }
        pthread_sigmask(SIG_UNBLOCK, &signals, nil)
    }

    /// True once SIGINT or SIGTERM has arrived.
    static var isSet: Bool { receivedSignal != 0 }
}
