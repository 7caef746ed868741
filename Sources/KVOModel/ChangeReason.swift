/// Why an event was sent (the wire's `reason`).
public enum ChangeReason: String, Sendable {
    /// The observation just began and asked for `initial`.
    case initial
    /// The observed value changed.
    case valueChanged
    /// A reference on the key path was re-pointed, or a referenced object was created or deleted:
    /// the observation now follows a different path (`old` and `new` are the full path's values).
    case pathChanged
    /// The observed object was deleted; the observation has ended.
    case sourceDeleted
    /// `observe` asked to resume from a revision that history no longer reaches: the event carries
    /// the current value (always as `new`), and live events follow.
    case resync
    /// The observation's key path now leads into an object its connection may not read (a reference
    /// was re-pointed, or the user's rules changed): the observation has ended, and the event carries
    /// no value (`old` and `new` are null).
    case forbidden
    /// An object whose id matches a pattern observation's pattern was created (docs/protocol.md,
    /// "Observing object sets (patterns)"). Pattern observations only.
    case created
    /// An object entered a live query's set: its filter (`where`) now holds on it, or it was created
    /// with values on which it holds (docs/protocol.md, "Live queries"). Live queries only.
    case entered
    /// An object left a live query's set: its filter no longer holds on it, or it was deleted. Live
    /// queries only.
    case left
    /// A `signal` sent to the observed object (docs/protocol.md, "Signals"): the event carries the sender's
    /// payload as `new` and changes nothing; no key path, no `old`.
    case signal

    /// The reason's code in the compact encoding (docs/protocol.md, "Compact events"): its name's first
    /// letter, distinct for every reason (`signal`'s is `g`, since `s` is `sourceDeleted`'s). `valueChanged` (`v`)
    /// is the default and never sent.
    public var compactCode: Character {
        switch self {
        case .initial: "i"
        case .valueChanged: "v"
        case .pathChanged: "p"
        case .sourceDeleted: "s"
        case .resync: "r"
        case .forbidden: "f"
        case .created: "c"
        case .entered: "e"
        case .left: "l"
        case .signal: "g"
        }
    }
}
