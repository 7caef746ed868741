import CLibUV
#if canImport(Glibc)
import Glibc
#endif

/// The one clock the server's time-based behaviour reads (docs/design.md, "The clock"): ttl and expiry, presence
/// grace, the first-request, login and TLS-handshake timeouts, housekeeping, the group commit's cadence, rate
/// windows, checkpoint pauses and cluster write deadlines.
///
/// Given to the server in `ServerConfiguration.clock`: nil (kvod's) is the system clock, which reads libuv's cached
/// loop time (`uv_now`, taken once per loop iteration) for milliseconds, `uv_hrtime` for nanoseconds and
/// `CLOCK_REALTIME` for the wall clock (its offset from the loop's time taken again every housekeeping tick, so that
/// no request reads a clock). A test gives a manual clock (`ServerClock.manual()`), which moves only when turned
/// (`Server.advanceTime(by:)`, as SwiftNIO's `EmbeddedEventLoop.advanceTime`). A final class with a flag, not a
/// protocol: the system clock's read on the request path (`wallMilliseconds`, once per write) inlines to a load of
/// the loop's `time` field, as `uv_now` was, with no existential call.
///
/// Request durations and loop iterations (their metrics, the slow-request log and the loop's stalls: `SlowLog`) read
/// `nanoseconds` and `idleNanoseconds`, which on the system clock are the real loop's (`uv_hrtime`, libuv's idle
/// time), so that a test can make a request or an iteration take time (`advancePerRead`). What stays on real time
/// (`uv_hrtime`, `CLOCK_MONOTONIC`) reads it on purpose: the group commit's duration, waits on other threads (the
/// NATS bridge's append deadlines, the stop's wait for threads, a blocking checkpoint's retries on SQLite) and
/// password hashing.
///
/// Owned by the server that was given it, one at a time; read and turned on its loop thread only (the `Sendable`
/// conformance lets a configuration carry it to the thread that makes the server).
public final class ServerClock: @unchecked Sendable {
    /// Whether this is a manual clock (then `manualNanoseconds` is its time) rather than the system's.
    let isManual: Bool
    /// A manual clock's monotonic time, in nanoseconds since it was made (starts at 1 s, so that no deadline is 0).
    private(set) var manualNanoseconds: UInt64 = 1_000_000_000
    /// A manual clock's time spent waiting: everything it was turned by `advance(nanoseconds:)` (the loop, on a
    /// manual clock, waits only while a test turns it), for `idleNanoseconds`.
    private var manualIdleNanoseconds: UInt64 = 0
    /// A manual clock only: how far each read of `nanoseconds` turns it, so that a test can make the loop's work take
    /// time without sleeping (a request's handling reads it when it begins and when it is answered, the end of a loop
    /// iteration once: `SlowLog`). 0, the default: reading never moves it. Loop thread.
    var advancePerRead: UInt64 = 0 {
        willSet { precondition(isManual || newValue == 0, "only a manual clock moves by itself") }
    }
    /// A manual clock's wall-clock time when its monotonic time was 0 (ms since 1970).
    private let manualWallOrigin: Int64
    /// The system clock's loop, set by the server that owns it once its loop exists (`attach(to:)`).
    private var loop: UnsafeMutablePointer<uv_loop_t>?
    /// The wall clock minus `milliseconds`, in ms (`refreshWallClockOffset()`).
    private(set) var wallClockOffset: Int64 = 0

    private init(isManual: Bool, wallMilliseconds: Int64) {
        self.isManual = isManual
        manualWallOrigin = wallMilliseconds &- 1000
        wallClockOffset = manualWallOrigin
    }

    /// The system clock (what kvod runs with; also `ServerConfiguration.clock` nil).
    public static func system() -> ServerClock { ServerClock(isManual: false, wallMilliseconds: 0) }

    /// A manual clock for tests, its wall clock at `wallMilliseconds` (ms since 1970; by default 2026-01-01
    /// 00:00 UTC) until turned.
    public static func manual(wallMilliseconds: Int64 = 1_767_225_600_000) -> ServerClock {
        ServerClock(isManual: true, wallMilliseconds: wallMilliseconds)
    }

    /// The server that owns a system clock binds it to its loop (before anything reads it).
    func attach(to loop: UnsafeMutablePointer<uv_loop_t>) {
        self.loop = loop
        refreshWallClockOffset()
    }

    /// Monotonic milliseconds: the loop's cached time (the system clock) or the manual time. Deadlines, timeouts
    /// and rate windows are counted in these.
    @inline(__always)
    var milliseconds: UInt64 {
        if isManual { return manualNanoseconds / 1_000_000 }
        return loop.unsafelyUnwrapped.pointee.time
    }

    /// Monotonic nanoseconds, read now (`uv_hrtime`) or the manual time (turned by `advancePerRead` first): request
    /// durations, loop iterations, the group commit's cadence and the checkpoint pause, which need finer than the
    /// loop's milliseconds.
    @inline(__always)
    var nanoseconds: UInt64 {
        guard isManual else { return uv_hrtime() }
        manualNanoseconds &+= advancePerRead
        return manualNanoseconds
    }

    /// Nanoseconds the loop has spent waiting for I/O since it started (`uv_metrics_idle_time`, which needs
    /// `UV_METRICS_IDLE_TIME`, set by `EventLoop`), or everything a manual clock was turned by `advance`: a loop
    /// iteration's work is the time since the last one ended less this (`ServerMetrics.iterationEnded`).
    var idleNanoseconds: UInt64 {
        guard isManual else { return loop.map { uv_metrics_idle_time($0) } ?? 0 }
        return manualIdleNanoseconds
    }

    /// The wall clock (ms since 1970) as the loop sees it: `milliseconds` plus the offset taken at the last
    /// housekeeping tick. Writes are applied at this time, and ttl deadlines are on it.
    @inline(__always)
    var wallMilliseconds: Int64 { Int64(bitPattern: milliseconds) &+ wallClockOffset }

    /// Takes the wall clock's offset from `milliseconds` again (at start and every housekeeping tick): the system
    /// clock reads `CLOCK_REALTIME`; a manual clock's offset never changes.
    func refreshWallClockOffset() {
        guard !isManual, let loop else { return }
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let wall = Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
        wallClockOffset = wall &- Int64(bitPattern: uv_now(loop))
    }

    /// Turns a manual clock forward by `nanoseconds` (monotonic and wall clock alike). A test calls
    /// `Server.advanceTime(by:)`, which also runs what became due.
    func advance(nanoseconds: UInt64) {
        precondition(isManual, "only a manual clock is turned")
        manualNanoseconds &+= nanoseconds
        manualIdleNanoseconds &+= nanoseconds
    }
}
