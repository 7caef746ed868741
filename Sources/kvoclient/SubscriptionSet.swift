import KVOClientKit
import KVOJSON

/// The key paths that one `kvoclient subscribe` observes, and how far each has got, across the
/// connections it makes.
///
/// Each key path remembers the revision of the last event printed for it (before any event, the
/// `rev` of its `observe` reply). After a reconnection, `observe(on:resuming:)` asks the server to
/// replay from there (`sinceRev`), and `accept(_:)` drops anything at or before it, so the user sees
/// every change once and in order. A key path ends with its `sourceDeleted` event and is not
/// observed again.
struct SubscriptionSet {
    /// One observed key path.
    struct Entry {
        let keyPath: String
        /// The revision of the last event printed (prior notifications aside), or the `observe`
        /// reply's `rev` before any; nil when the server did not say.
        var lastRev: Int64?
        /// The revision of the last prior notification printed, so a replay does not repeat it.
        var lastPriorRev: Int64?
        /// Set by its `sourceDeleted` event.
        var ended = false
        /// The subscription id the server gave this key path on the first connection. The server
        /// numbers subscriptions anew on every connection; `--json` prints this one throughout, so a
        /// `sub` means the same key path before and after a reconnection.
        var stableSub: Int64?
    }

    let object: String
    let options: [ObservationOption]
    private(set) var entries: [Entry]
    /// Where the current connection's subscription ids point in `entries`.
    private var entryIndexBySub: [Int64: Int] = [:]

    init(object: String, keyPaths: [String], options: [ObservationOption]) {
        self.object = object
        self.options = options
        entries = keyPaths.map { Entry(keyPath: $0) }
    }

    /// True once every key path has ended with `sourceDeleted`.
    var isFinished: Bool { entries.allSatisfy(\.ended) }

    /// Number of key paths still observed.
    var activeCount: Int { entries.count(where: { !$0.ended }) }

    /// Sends one `observe` per key path that has not ended. The first time (`resuming` false) with
    /// the user's options, recording each reply's `rev`; after a reconnection with `sinceRev` set to
    /// the last revision printed and without `initial`.
    mutating func observe(on client: KVOConnection, resuming: Bool) throws(KVOClientError) {
        entryIndexBySub = [:]
        let names = options.filter { !resuming || $0 != .initial }.map(\.rawValue)
        for index in entries.indices where !entries[index].ended {
            let sinceRev = resuming ? entries[index].lastRev : nil
            let reply = try client.observe(
                object: object, keyPath: entries[index].keyPath, options: names, sinceRev: sinceRev)
            entryIndexBySub[reply.sub] = index
            if entries[index].stableSub == nil { entries[index].stableSub = reply.sub }
            if !resuming { entries[index].lastRev = reply.rev }
        }
    }

    /// Records an event and says whether to print it: false for an event of no current
    /// subscription and for one at or before the last revision already printed for its key path
    /// (a replay overlapping what was seen). `initial` and `resync` events are always printed and
    /// move the key path's position to their revision.
    mutating func accept(_ event: JSONValue) -> Bool {
        guard let sub = event["sub"]?.intValue, let index = entryIndexBySub[sub], !entries[index].ended else {
            return false
        }
        guard let rev = event["rev"]?.intValue else { return true }
        let reason = event["reason"]?.stringValue
        if reason == "initial" || reason == "resync" {
            entries[index].lastRev = rev
            entries[index].lastPriorRev = nil
            return true
        }
        if let last = entries[index].lastRev, rev <= last { return false }
        if event["change"]?["notificationIsPrior"] == .bool(true) {
            if entries[index].lastPriorRev == rev { return false }
            entries[index].lastPriorRev = rev
            return true
        }
        entries[index].lastRev = rev
        // Both end the subscription on the server: resubscribing after a reconnection would not help.
        if reason == "sourceDeleted" || reason == "forbidden" { entries[index].ended = true }
        return true
    }

    /// `event` with its `sub` replaced by its key path's stable id (`Entry.stableSub`): the same
    /// number for the same key path across reconnections. Unchanged before any reconnection.
    func withStableSub(_ event: JSONValue) -> JSONValue {
        guard case var .object(fields) = event, let sub = fields["sub"]?.intValue, let index = entryIndexBySub[sub],
              let stable = entries[index].stableSub, stable != sub else { return event }
        fields["sub"] = .int(stable)
        return .object(fields)
    }

    /// Where each key path resumes, for the note printed after a reconnection:
    /// `date after rev 12, address.city after rev 10`.
    var resumeSummary: String {
        entries.filter { !$0.ended }
            .map { entry in "\(entry.keyPath) after rev \(entry.lastRev.map(String.init) ?? "?")" }
            .joined(separator: ", ")
    }
}
