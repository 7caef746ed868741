/// What an observation's buffering policy did before a change (`Change.gap`): the reader learns of every
/// change it will not see, and of every pause. A value; any thread.
public enum ChangeGap: Sendable, Hashable {
    /// `count` changes before this one were dropped unread (`ObservationBuffering.bufferingNewest`) or
    /// replaced by this one (`.latestOnly`). Their revisions lie between the last change delivered and this one.
    case dropped(count: Int)
    /// The buffer was full (`ObservationBuffering.pausing`): the client stopped the server observation after
    /// the change with revision `afterRev` and resumed it with `sinceRev: afterRev` when the reader came back.
    /// This change and the ones after it came from kvod's history: none is missing, unless this change's
    /// `reason` is `resync` (history no longer reached back; its `new` is the current value).
    case resumed(afterRev: Int64)

    /// Two gaps before the same change, as one: dropped counts add up.
    func merged(with other: ChangeGap?) -> ChangeGap {
        switch (self, other) {
        case let (.dropped(a), .dropped(b)?): .dropped(count: a + b)
        case (_, nil): self
        case let (_, other?): other
        }
    }
}
