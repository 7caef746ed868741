/// The bounds of presence (docs/protocol.md, "Presence", "Limits"): what one client's sessions may cost
/// everyone else. Past one, the request is refused `too_large` (with `limit`) and nothing changes.
enum SessionLimits {
    /// The grace a session gets when `session` names none, in seconds: long enough for a client to
    /// reconnect after a network blip or a kvod restart, short enough that a crashed client's presence ends soon.
    static let defaultGraceSeconds: Int64 = 10
    /// The longest grace a client may ask for, in seconds: a session whose connection is gone is held at
    /// most this long.
    static let maximumGraceSeconds: Int64 = 300
    /// Sessions held at once, attached or not.
    static let maximumSessions = 65_536
    /// Sessions one user holds at once (with users defined; open mode has only `maximumSessions`).
    static let maximumSessionsPerUser = 1_024
    /// `onDisconnect` actions one session holds.
    static let maximumActionsPerSession = 64
    /// The bytes of one action's request, encoded.
    static let maximumActionBytes = 16_384
    /// The bytes of every session's actions together: with the counts above, what sessions can hold in memory.
    static let maximumTotalActionBytes = 64 << 20
    /// The bytes of one user's actions, all its sessions together (with users defined), so that one user
    /// cannot fill `maximumTotalActionBytes` for everyone.
    static let maximumActionBytesPerUser = 4 << 20
    /// Ephemeral objects one session holds.
    static let maximumEphemeralObjectsPerSession = 1_024
}
