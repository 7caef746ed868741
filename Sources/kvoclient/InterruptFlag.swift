#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// Set to a signal number by the handler that `InterruptFlag.install()` registers, and read by the
/// commands' loops on any thread. An atomic (lock-free, so async-signal-safe), not a plain global: the
/// handler runs on whichever thread the signal lands on, and ThreadSanitizer rightly reported the plain
/// `Int32` this was as a race with the reading task's thread.
private let receivedSignal = Atomic<Int32>(0)

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
            signal(signalNumber) { number in receivedSignal.store(number, ordering: .relaxed) }
            sigaddset(&signals, signalNumber)
        }
        pthread_sigmask(SIG_UNBLOCK, &signals, nil)
    }

    /// True once SIGINT or SIGTERM has arrived.
    static var isSet: Bool { receivedSignal.load(ordering: .relaxed) != 0 }
}
