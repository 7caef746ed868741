import KVOModel

/// Whether the server's writes can be stored now, and if not, the refusal every write gets
/// (docs/design.md, "When the store cannot write"): the store's `StorageHealth`, kept with its refusal (the one
/// check `handleLine` makes per write), and when the housekeeping tick last asked the store about it. What a
/// failure leads to (logging, metrics, a roll-back) is `Server+StorageHealth`'s.
///
/// Owned by `Server` (a value stored in it); loop thread only.
struct StorageStatus {
    /// `store.keepsWrites`, read once: whether writes wait for a group commit before any output about them
    /// (`Server.mayWriteImmediately`, on the hot path, reads this, not the store). Without it, nothing here changes.
    let keepsWrites: Bool
    /// Whether the store takes writes.
    private(set) var health = StorageHealth.writable
    /// The error a write gets while the store does not take writes (`health.refusal`); nil while writable.
    private(set) var refusal: KVOError?
    /// When the housekeeping tick last asked the store (`Server.checkStorage`), in milliseconds.
    private var lastCheck: UInt64 = 0

    init(keepsWrites: Bool) {
        self.keepsWrites = keepsWrites
    }

    /// Moves to `health` (from `.writable`, or from one refusal to another) unless the health is `health` already
    /// or `.lost` (only a restart ends it). Returns whether it moved, and whether the store was writable before.
    mutating func move(to health: StorageHealth) -> (moved: Bool, wasWritable: Bool) {
        guard health != self.health else { return (false, false) }
        if case .lost = self.health { return (false, false) }
        let wasWritable = self.health == .writable
        self.health = health
        refusal = health.refusal
        return (true, wasWritable)
    }

    /// Writes are taken again. Returns why they were not (`StorageHealth.reason`).
    mutating func becomeWritable() -> String {
        let was = health.reason ?? ""
        health = .writable
        refusal = nil
        return was
    }

    /// Whether the housekeeping tick at `now` (milliseconds) asks the store again: once a second.
    mutating func checkIsDue(now: UInt64) -> Bool {
        guard now &- lastCheck >= 1000 else { return false }
        lastCheck = now
        return true
    }

    /// The next housekeeping tick asks the store (`--max-disk` changed on reload).
    mutating func checkAtNextTick() {
        lastCheck = 0
    }
}
