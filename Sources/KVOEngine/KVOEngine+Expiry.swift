import KVOJSON
import KVOModel

/// Expiry (docs/protocol.md, "Expiry"): an object with a time to live is deleted once a write time reaches
/// its deadline, by an `expire` write that the server sends as any client would.
///
/// The engine never reads a clock: `writeTime` is the wall-clock time (ms since 1970) of the write being
/// applied, set by the server before each request (a single node reads it once per loop iteration; a
/// cluster node takes the one stamped in the replication entry), so every node computes the same deadlines
/// at the same stream position. Any write of an object with a ttl (or a `touch`) moves its deadline to the
/// write time plus its ttl; deleting the object drops it. `expire` deletes only an object that is due at its
/// own write time and unchanged since the revision the server saw (`ifRev`), so that of several nodes that
/// found it due, the first in the stream deletes it and the others are refused alike everywhere.
/// Loop thread only, as the engine.
extension KVOEngine {
    /// Longest ttl accepted: ten years, in milliseconds.
    public static let maximumTTL: Int64 = 10 * 366 * 86_400_000

    /// `object`'s expiry, nil when it has none (or does not exist).
    public func expiry(of object: String) -> Expiry? { expiries[object] }

    /// Every expiry, by object id (for the digest, snapshots and tests).
    public var expiryEntries: [String: Expiry] { expiries.entries }

    /// Number of objects with a ttl.
    public var expiringObjectCount: Int { expiries.count }

    /// Gives `object` (which exists) a time to live of `ttl` milliseconds from `writeTime`; 0 removes it.
    /// Part of the write that carried it (`create` or `set` with `ttl`): no revision of its own.
    public func setTTL(_ object: String, milliseconds ttl: Int64) throws(KVOError) {
        guard objects.contains(object) else { throw notFound(object) }
        guard ttl >= 0, ttl <= KVOEngine.maximumTTL else {
            throw KVOError(.badRequest, "'ttl' must be from 0 (no expiry) to \(KVOEngine.maximumTTL / 1000) seconds")
        }
        noteExpiryChange(of: object)
        if ttl == 0 {
            expiries.remove(object)
        } else {
            expiries.set(object, Expiry(ttl: ttl, deadline: writeTime &+ ttl))
        }
    }

    /// `touch`: moves `object`'s deadline to `writeTime` plus its ttl without writing a value (no revision,
    /// no event). Returns the expiry, nil for an object without one (then nothing changes).
    public func touch(_ object: String, access: ConnectionAccess? = nil) throws(KVOError) -> Expiry? {
        try access?.require(.write, on: object)
        guard objects.contains(object) else { throw notFound(object) }
        refreshExpiry(of: object)
        return expiries[object]
    }

    /// `expire`: deletes `object` because its time to live ended, when it is due at `writeTime` and has not
    /// changed after `ifRev`; otherwise `conflict` (`not_found` when it is gone) and nothing changes. Its
    /// observers get `sourceDeleted` with the cause `expired`.
    ///
    /// Its operation's row admits only a server admin (the server itself, in practice), so no right on the
    /// object is asked for here.
    public func expire(_ object: String, ifRev: UInt64,
                       notifications: inout [ChangeNotification]) throws(KVOError) -> UInt64 {
        guard let changed = objects.changedRevision(of: object) else { throw notFound(object) }
        guard changed <= ifRev else {
            throw KVOError(.conflict, "object '\(object)' changed after revision \(ifRev): not expired",
                           details: ["condition": "ifRev", "rev": .int(Int64(revision)), "changedRev": .int(Int64(changed))])
        }
        guard let expiry = expiries[object], expiry.deadline <= writeTime else {
            throw KVOError(.conflict, "object '\(object)' is not due to expire at this write's time",
                           details: ["condition": "due", "rev": .int(Int64(revision))])
        }
        let start = notifications.count
        let rev = try delete(object, access: nil, expired: true, notifications: &notifications)
        // The deletion's endings say why: its observers', its pattern observers' and its live queries'.
        for index in start..<notifications.count
        where notifications[index].reason == .sourceDeleted || notifications[index].reason == .left {
            notifications[index].expired = true
        }
        return rev
    }

    /// The objects due at `now` (wall-clock ms) with the revision of their last change, at most `limit` of
    /// them (earliest first: the rest wait for the next call), for the server to send `expire` for; each is
    /// asked for again `retry` ms later while it stays due.
    public func dueExpiries(now: Int64, retry: Int64, limit: Int = .max) -> [(object: String, changedRev: UInt64)] {
        guard !expiries.isEmpty else { return [] }
        return expiries.due(now: now, retry: retry, limit: limit).compactMap { object in
            objects.changedRevision(of: object).map { (object, $0) }
        }
    }

    /// No object is due before this (wall-clock ms; `Int64.max` when none has a ttl): the server compares its clock
    /// with it before each request and expires what is due first, so that no read sees an object past its deadline.
    /// Earlier than needed at times (a refreshed deadline's old reminder), never later.
    public var expiryCheckAt: Int64 { expiries.earliestReminder }

    /// When the server's timer should next look for due objects (wall-clock ms), nil when none has a ttl.
    public var nextExpiryCheck: Int64? { expiries.isEmpty ? nil : expiries.nextReminder() }

    /// After a write of `object`: its deadline moves to `writeTime` plus its ttl, if it has one.
    func refreshExpiry(of object: String) {
        guard var expiry = expiries[object] else { return }
        noteExpiryChange(of: object)
        expiry.deadline = writeTime &+ expiry.ttl
        expiries.set(object, expiry)
    }

    /// `object` was deleted: its expiry goes with it.
    func dropExpiry(of object: String) {
        guard expiries[object] != nil else { return }
        noteExpiryChange(of: object)
        expiries.remove(object)
    }

    /// Before `object`'s expiry changes: the batch's undo keeps what it was, the store learns it changed.
    private func noteExpiryChange(of object: String) {
        batch?.saveExpiry(object, expiries[object])
        if recordsCommitBatches { uncommittedExpiries.insert(object) }
    }

    /// Puts back expiries as a batch found them (`abortBatch`).
    func restoreExpiries(_ saved: [String: Expiry?]) {
        for (object, expiry) in saved {
            if let expiry { expiries.set(object, expiry) } else { expiries.remove(object) }
        }
    }

    /// Restores expiries loaded from a store or a snapshot.
    func restoreExpiries(_ loaded: [String: Expiry]) {
        for (object, expiry) in loaded where objects.contains(object) { expiries.set(object, expiry) }
    }
}
