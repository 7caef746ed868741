/// How many changes an observation keeps while nobody reads them, and what happens when it has that many
/// (the `buffering:` parameter of `KVOClient.observe`, `subscribe` and `withObservation`), in the spirit of
/// `AsyncStream`'s buffering policies. A value; any thread.
///
/// The limits bound what waits unread while the reader is busy or gone: a reader waiting for changes takes
/// each socket read's changes whole (at most 64 KiB of events), so one that keeps up is never paused, and
/// its iterator holds at most one such batch, or one buffer's worth, besides what waits.
///
/// Whatever the policy, the reader is never left to guess: a change after dropped or coalesced ones carries
/// `Change.gap`, and so does the first change after a paused observation resumed. The bound counts changes
/// (not bytes): a change holds its values as received, so the memory is at most the limit times the largest
/// change.
public enum ObservationBuffering: Sendable, Hashable {
    /// At most `limit` unread changes; when a change arrives with that many waiting, the client stops the
    /// server observation (`unobserve`) and keeps the `limit` it has. Once the reader has taken them all and
    /// asks for the next, the client observes again with `sinceRev` (the `rev` of the last change it
    /// kept): kvod replays the changes in between from its history, each exactly once and in order, or
    /// sends one `resync` change with the current value when its history no longer reaches back. The first
    /// change after the pause carries `Change.gap == .resumed(afterRev:)`. Nothing is lost while history
    /// holds it, but every resume replays from history: a reader that never catches up costs kvod a replay per
    /// `limit` changes read (use `latestOnly` or `bufferingNewest` for those). A replay larger than the
    /// server's output buffer ends the observation with `too_large`. The default, with
    /// `defaultLimit` (100,000).
    case pausing(limit: Int)
    /// At most `limit` unread changes, the newest: when full, the oldest unread change is dropped (the server
    /// observation goes on). The oldest change still buffered after a drop carries
    /// `Change.gap == .dropped(count:)`, the number dropped before it.
    case bufferingNewest(Int)
    /// One unread change per object (per key path: an ordinary observation keeps at most one, a pattern
    /// observation one per matching object), the newest: a new change replaces the unread ones of its object
    /// and carries `Change.gap == .dropped(count:)`, how many it replaced. Its `old` is the value just before it,
    /// not the one the reader saw last: read `new`. The right choice for UI, which shows the latest value. Kinds other than `setting` (array insertions, ...) coalesced this way cannot
    /// be replayed onto a copy: read the value again when `gap` is set.
    case latestOnly
    /// At most `limit` unread changes; when one more arrives, the client ends the observation (`unobserve`):
    /// the reader gets the `limit` changes, then the iteration throws `KVODError.bufferFull`, which carries
    /// the `rev` to resume from (`KVOClient.subscribe(..., sinceRev:)`).
    case endingWhenFull(limit: Int)

    /// The default limit of `pausing`: 100,000 changes, kvod's default history (`--history`), so that a replay
    /// kvod can serve (a resume, a `sinceRev` after a reconnection) never fills the buffer by itself. With a
    /// smaller default each resume's replay paused the observation again: a 50,000-change replay read at 1,000
    /// took 50 replays of what was left (kvod encoding about 25 times the changes delivered) and ran at a third of
    /// the speed (`kvod-bench client`, docs/performance.md, issue 29). Choose a smaller `pausing` limit, or
    /// `latestOnly`, where memory matters more than that.
    public static let defaultLimit = 100_000

    /// `pausing(limit: 100_000)`: bounded, and lossless while kvod's history reaches back.
    public static let `default`: ObservationBuffering = .pausing(limit: defaultLimit)

    /// The bound on the changes buffered (at least 1); nil for `latestOnly` (one per object).
    var limit: Int? {
        switch self {
        case let .pausing(limit), let .bufferingNewest(limit), let .endingWhenFull(limit): max(1, limit)
        case .latestOnly: nil
        }
    }
}
