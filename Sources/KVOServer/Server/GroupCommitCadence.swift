import CLibUV
import KVOModel

/// The group commit's cadence under a steady stream of writes (docs/design.md, "Durability"): when the last group
/// commit started, which writers wrote since, whether the writes waiting now were held, and the timer that commits a
/// held batch when no input wakes the loop first. The server decides whether anything waits to be committed
/// (`Server.holdsGroupCommit`); this part decides whether it may wait longer.
///
/// Owned by `Server` (a value stored in it, the timer's handle allocated with it and closed by it); loop thread only.
struct GroupCommitCadence {
    /// How long holds pause after a hold that no writer used, in intervals: 200 (100 ms at the default 0.5 ms), so
    /// that a writer that waits for each reply loses one probing hold per pause (the interval, rounded up to
    /// libuv's millisecond timer: about 1 – 2 ms in 100, where 50 intervals cost it 3 – 9 % of its rate).
    static let holdPauseIntervals: UInt64 = 200

    /// The least time between the starts of two group commits while writes keep arriving, in nanoseconds
    /// (0: every iteration that wrote commits, and nothing else here is used).
    let intervalNanoseconds: UInt64
    /// Fires when a held group commit is due, for the case where no more input wakes the loop first
    /// (`Server.groupCommitCallback`).
    let timer: UnsafeMutablePointer<uv_timer_t>
    /// Whether `timer` is running.
    private(set) var timerArmed = false
    /// When the last group commit of writes started (`ServerClock.nanoseconds`).
    private(set) var lastStart: UInt64 = 0
    /// The connections that wrote since the last group commit, and whether one of them wrote again before its
    /// write was committed (it does not wait for each reply: holding the commit costs it nothing). Kept only with
    /// a cadence (`intervalNanoseconds` > 0).
    private var writersSinceCommit = Set<ConnectionID>()
    private var writerRepeatedSinceCommit = false
    /// Whether the writes waiting for the next group commit were held (`holds(now:armsTimer:)`).
    private var wasHeld = false
    /// After a hold that no writer used (writers that each wait for their reply), no hold until then
    /// (`ServerClock.nanoseconds`), unless a writer sends another write before its last is committed.
    private var holdsPausedUntil: UInt64 = 0

    init(intervalNanoseconds: UInt64) {
        self.intervalNanoseconds = intervalNanoseconds
        timer = allocateHandle(uv_timer_t.self, kind: UV_TIMER)
    }

    /// A write request from `connection` (with a cadence only): remembers whether its writer wrote before, since
    /// the last group commit.
    @inline(__always)
    mutating func noteWriter(_ connection: ConnectionID) {
        guard intervalNanoseconds > 0 else { return }
        if !writersSinceCommit.insert(connection).inserted { writerRepeatedSinceCommit = true }
    }

    /// A group commit of writes starts at `now`: the next interval runs from here. A hold that no writer used
    /// (each waits for its reply before the next write) only delayed it: none for a while.
    mutating func commitStarted(at now: UInt64) {
        lastStart = now
        guard intervalNanoseconds > 0 else { return }
        if wasHeld && !writerRepeatedSinceCommit {
            holdsPausedUntil = now &+ intervalNanoseconds &* GroupCommitCadence.holdPauseIntervals
        }
        wasHeld = false
        writerRepeatedSinceCommit = false
        writersSinceCommit.removeAll(keepingCapacity: true)
    }

    /// Whether writes waiting at `now` wait for a later group commit, because the last one started less than
    /// `intervalNanoseconds` ago (the caller has checked that there are writes, and that they may wait). A write
    /// after a quieter spell is never held: at most one commit per interval, not one per write. After a hold in
    /// which no writer wrote twice, holds pause for `holdPauseIntervals` intervals, unless a writer writes twice
    /// before a commit. When it holds, `timer` is armed for when the commit is due (`armsTimer`: false with a
    /// manual clock, whose `advanceTime(by:)` commits once the interval has passed on it).
    mutating func holds(now: UInt64, armsTimer: Bool) -> Bool {
        guard intervalNanoseconds > 0 else { return false }
        let elapsed = now &- lastStart
        guard elapsed < intervalNanoseconds else { return false }
        if !wasHeld {
            guard now >= holdsPausedUntil || writerRepeatedSinceCommit else { return false }
            wasHeld = true
        }
        if !timerArmed && armsTimer {
            // libuv's timers count whole milliseconds: the timer may fire up to a millisecond late, and only when
            // no input wakes the loop before (under a steady stream the check phase commits first).
            let remaining = intervalNanoseconds - elapsed
            let milliseconds = (remaining + 999_999) / 1_000_000
            uv_timer_start(timer, Server.groupCommitCallback, milliseconds, 0)
            timerArmed = true
        }
        return true
    }

    /// The commit is made now (or the timer fired): the timer is stopped if it runs.
    @inline(__always)
    mutating func disarm() {
        guard timerArmed else { return }
        uv_timer_stop(timer)
        timerArmed = false
    }

    /// The timer fired: it no longer runs.
    mutating func timerFired() {
        timerArmed = false
    }
}
