import KVOJSON

/// What an `observe` reply says: the new subscription's id and, from servers that keep a history,
/// the revision current when the observation began (the point to resume from before any event).
public struct ObserveReply: Equatable, Sendable {
    /// The subscription id, unique on the server; events carry it as `sub`.
    public let sub: Int64
    /// The server's current revision when the observation began; nil if the reply has no `rev`.
    public let rev: Int64?

    public init(sub: Int64, rev: Int64?) {
        self.sub = sub
        self.rev = rev
    }
}

extension KVOConnection {
    /// Sends `observe` for `keyPath` on `object` and returns the reply's `sub` and `rev`.
    ///
    /// `options` are the protocol's names (`new`, `old`, `initial`, `prior`). With `sinceRev`, the
    /// server first replays every change to the key path after that revision (or sends one `resync`
    /// event when its history no longer reaches back that far), then continues live. Throws
    /// `.server` for an `ok: false` reply and `.malformedMessage` for a reply without `sub`.
    @discardableResult
    public func observe(
        object: String, keyPath: String, options: [String] = ["new"], sinceRev: Int64? = nil,
        timeout: Double? = 10
    ) throws(KVOClientError) -> ObserveReply {
        var params: [String: JSONValue] = [
            "object": .string(object),
            "keyPath": .string(keyPath),
            "options": .array(options.map { .string($0) }),
        ]
        if let sinceRev { params["sinceRev"] = .int(sinceRev) }
        let reply = try call("observe", params, timeout: timeout)
        guard let sub = reply["sub"]?.intValue else { throw .malformedMessage(JSONValue.object(reply).description) }
        return ObserveReply(sub: sub, rev: reply["rev"]?.intValue)
    }
}

extension KVOClientError {
    /// True for the failures that a new connection may cure: the server closed the connection,
    /// could not be reached, went silent or the socket failed. False for an answer from the server
    /// (`.server`) and for a message that is not JSON.
    public var isConnectionLoss: Bool {
        switch self {
        case .cannotConnect, .connectionClosed, .timedOut, .io: return true
        // A TLS failure (a certificate refused) would fail again the same way.
        case .malformedMessage, .server, .tls: return false
        }
    }
}
