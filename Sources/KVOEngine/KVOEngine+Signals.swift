import KVOJSON
import KVOModel

/// Signals (docs/protocol.md, "Signals"): a payload handed to the observers of an object as one notification of
/// reason `signal`, with no revision, no history and nothing stored. Loop thread only, like the rest of `KVOEngine`.
extension KVOEngine {
    /// Bytes a signal's payload may take as compact JSON.
    public static let maximumSignalBytes = 64 << 10

    /// `signal`: `payload` (canonical JSON text) goes to the observers of `object` (`signalRecipients`). Needs
    /// `write` on the object, checked as every write checks it, before anything about the object is looked at; then
    /// `not_found` when it does not exist (as `touch`). The payload's size and depth are refused before anything
    /// (`too_large`). Changes nothing: the one notification appended is the signal; returns how many recipients.
    @discardableResult
    package func signal(_ object: String, payload: CanonicalText, access: ConnectionAccess? = nil,
                       notifications: inout [ChangeNotification]) throws(KVOError) -> Int {
        try access?.require(.write, on: object)
        try Self.requireSignalFit(payload)
        guard objects.contains(object) else { throw notFound(object) }
        return deliverSignal(to: object, payload: payload, notifications: &notifications)
    }

    /// Refuses a payload over `maximumSignalBytes` or deeper than a stored value may be (`StoredDepth.maximum`:
    /// the event around it must still parse in every client).
    package static func requireSignalFit(_ payload: CanonicalText) throws(KVOError) {
        guard payload.count <= maximumSignalBytes else {
            throw KVOError(.tooLarge, "a signal's payload is at most \(maximumSignalBytes) bytes of compact JSON, not \(payload.count)",
                           details: ["limit": .int(Int64(maximumSignalBytes))])
        }
        guard payload.nestingDepth(upTo: StoredDepth.maximum) <= StoredDepth.maximum else {
            throw KVOError(.tooLarge, "a signal's payload nests deeper than \(StoredDepth.maximum) levels",
                           details: ["limit": .int(Int64(StoredDepth.maximum))])
        }
    }

    /// Appends the signal for this node's observers of `object` (a live signal, or one another cluster node relayed,
    /// whose sender that node checked); nothing when none may hear it. Returns how many recipients.
    @discardableResult
    package func deliverSignal(to object: String, payload: CanonicalText,
                              notifications: inout [ChangeNotification]) -> Int {
        let recipients = signalRecipients(of: object)
        guard !recipients.isEmpty else { return 0 }
        // One notification for every recipient: no key path, the object named (a pattern observer needs it, and one
        // tail then serves all), the payload as `new` held as its text, so it is never encoded again.
        var notification = ChangeNotification(object: object, keyPath: "", reason: .signal, rev: revision, kind: .setting,
                                              isPrior: false, held: .decoded(.null), .text(payload), recipients: recipients)
        notification.namesObject = true
        notifications.append(notification)
        return recipients.count
    }

    /// Who hears a signal to `object`: the observations of any key path of it and the pattern observations whose
    /// set holds it (a live query's filter holding on it), each only if its connection may read `object` now (the
    /// read rule: a shared delivery picks its recipients by `allowsRead`). Each recipient's options are the
    /// signal's: `new` (the payload) always, never `old`, its encoding kept; so at most two tails (full and compact)
    /// are encoded however many observe. In subscription order.
    func signalRecipients(of object: String) -> [Recipient] {
        var recipients: [Recipient] = []
        let location = [StoredLocation(object: object, path: [])]
        for observation in registry.observations(on: object) where observation.mayRead(location) {
            recipients.append(Self.signalRecipient(observation.recipient))
        }
        if !registry.patterns.isEmpty {
            let exists = objects.contains(object)
            for observation in registry.patterns.allMatching(object) {
                // A live query hears the objects in its set; a plain pattern, any matching object it may read.
                let hears = observation.filter == nil ? observation.mayRead(object) : exists && isInSet(object, of: observation)
                if hears { recipients.append(Self.signalRecipient(observation.recipient)) }
            }
            recipients.sort { $0.subscription < $1.subscription }
        }
        return recipients
    }

    private static func signalRecipient(_ recipient: Recipient) -> Recipient {
        Recipient(connection: recipient.connection, subscription: recipient.subscription,
                  options: recipient.options.subtracting([.old, .prior, .initial]).union(.new))
    }
}
