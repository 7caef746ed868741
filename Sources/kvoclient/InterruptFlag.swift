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
    /// Installs the handlers. Blocking calls in progress see `EINTR` and keep waiting, so the loop
    /// notices the flag at its next timeout.
    static func install() {
        for signalNumber in [SIGINT, SIGTERM] {
            signal(signalNumber) { number in receivedSignal = number }
        }
    }

    /// True once SIGINT or SIGTERM has arrived.
    static var isSet: Bool { receivedSignal != 0 }
}
