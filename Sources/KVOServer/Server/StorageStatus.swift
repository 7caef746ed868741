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
    /// Whether the store is `.full` only because its files passed `--max-disk` (the file system has room): then the
    /// writes that only remove what is stored are taken (`admitsFreeingWrites`), so that room can be made.
    private(set) var isOverDiskLimit = false
    /// When the housekeeping tick last asked the store (`Server.checkStorage`), in milliseconds.
    private var lastCheck: UInt64 = 0

    init(keepsWrites: Bool) {
        self.keepsWrites = keepsWrites
    }

    /// Moves to `health` (from `.writable`, or from one refusal to another) unless the health is `health` already
    /// or `.lost` (only a restart ends it). Returns whether it moved, and whether the store was writable before.
    /// `overDiskLimit`: `health` is `.full` because the files passed `--max-disk`, not because the file system is full.
    mutating func move(to health: StorageHealth, overDiskLimit: Bool = false) -> (moved: Bool, wasWritable: Bool) {
        if case .lost = self.health { return (false, false) }
        guard health != self.health else {
            isOverDiskLimit = overDiskLimit
            return (false, false)
        }
        let wasWritable = self.health == .writable
        self.health = health
        refusal = health.refusal
        isOverDiskLimit = overDiskLimit
        return (true, wasWritable)
    }

    /// Whether a write of a row that only removes what is stored (`OperationDeclaration.freesSpace`) is taken although
    /// writes are refused: past `--max-disk` only (a file system without room could not store even those).
    var admitsFreeingWrites: Bool { isOverDiskLimit }

    /// Writes are taken again. Returns why they were not (`StorageHealth.reason`).
    mutating func becomeWritable() -> String {
        let was = health.reason ?? ""
        health = .writable
        refusal = nil
        isOverDiskLimit = false
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
