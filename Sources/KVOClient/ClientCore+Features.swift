import KVOJSON

// The protocol features the server announced (`hello`'s `features`, docs/protocol.md "Operations"): kvod refuses
// a field it does not know, so the client sends an optional field only when the server announced its feature, and
// fails the request locally otherwise (`KVODError.notAnnounced`). Any thread, under `state`'s lock.

extension ClientCore {
    /// The fields (and operations) that need a feature, and its name.
    static let featureOfField: [String: String] = [
        "ttl": "ttl", "ifExists": "conditions", "ifAbsent": "conditions", "ifEquals": "conditions", "ifRev": "conditions",
        "ephemeral": "ephemeral", "where": "liveQueries", "sinceRev": "sinceRev", "atLeastRev": "atLeastRev",
    ]
    static let featureOfOperation: [String: String] = [
        "session": "sessions", "onDisconnect": "sessions", "cancelOnDisconnect": "sessions", "endSession": "sessions",
        "signal": "signals",
    ]

    /// Records what a `hello` reply announced (the handshake's; nothing announced from an older server).
    func announce(features: JSONValue?) {
        let names = features?.arrayValue?.compactMap(\.stringValue) ?? []
        state.withLock { $0.features = Set(names) }
    }

    /// What the server announced.
    var features: Set<String> { state.withLock { $0.features } }

    /// Throws `notAnnounced` when `op` with `params` needs a feature the server did not announce: the fields and
    /// operations of `featureOfField` and `featureOfOperation`, in a `batch`'s parts and an `onDisconnect`'s
    /// `request` too.
    func requireAnnounced(_ op: String, _ params: [String: JSONValue]) throws(KVODError) {
        let announced = features
        func check(_ op: String, _ params: [String: JSONValue]) throws(KVODError) {
            if let feature = ClientCore.featureOfOperation[op], !announced.contains(feature) {
                throw .notAnnounced(feature: feature, operation: op)
            }
            for key in params.keys.sorted() {
                if let feature = ClientCore.featureOfField[key], !announced.contains(feature) {
                    throw .notAnnounced(feature: feature, operation: op)
                }
            }
            var parts = params["ops"]?.arrayValue ?? []
            if let request = params["request"] { parts.append(request) }
            for case let .object(part) in parts {
                try check(part["op"]?.stringValue ?? op, part)
            }
        }
        try check(op, params)
    }
}
