import KVOJSON

/// A session (docs/protocol.md, "Presence"): what kvod ends, running its `onDisconnect` writes and deleting
/// its ephemeral objects, once the client has been gone for `grace`. A value; any thread.
public struct KVOSession: Sendable, Equatable {
    /// The server's id for it (a capability: whoever knows it, as the same user, can resume it).
    public let id: String
    /// How long it outlives a lost connection.
    public let grace: Duration
}

extension KVOClient {
    /// Begins a session for this client (one per client). From now on every reconnection resumes it before
    /// any other request, so a network blip shorter than `grace` (nil: the server's default, 10 s) runs none
    /// of its actions; a reconnection that finds it ended (the client was gone longer) calls
    /// `onSessionLost`'s handler, and the client has no session until it begins another.
    @discardableResult
    public func startSession(grace: Duration? = nil) async throws -> KVOSession {
        var params: [String: JSONValue] = [:]
        if let grace { params["grace"] = WriteOperation.seconds(grace) }
        let reply = try await request("session", params)
        guard case let .string(id)? = reply["session"], let seconds = reply["grace"]?.doubleValue else {
            throw KVODError.malformedReply("a 'session' reply without session or grace")
        }
        let session = KVOSession(id: id, grace: .milliseconds(Int64((seconds * 1000).rounded())))
        core.state.withLock { $0.session = session }
        return session
    }

    /// The client's session, nil before `startSession` and after it ended or was lost.
    public var session: KVOSession? { core.state.withLock { $0.session } }

    /// `handler` runs (on the client's I/O thread: return quickly) when a reconnection finds the session
    /// ended: its actions ran and its ephemeral objects are gone; begin another and register them again.
    public func onSessionLost(_ handler: @escaping @Sendable (KVOSession) -> Void) {
        core.state.withLock { $0.sessionLostHandler = handler }
    }

    /// Registers `write` to run when the session ends (the connection lost for longer than the grace, or
    /// `endSession`), with this client's user's rights at that moment; returns the action's number.
    /// `bad_request` without a session, `too_large` past the limits.
    ///
    /// ```swift
    /// try await kvod.startSession()
    /// try await kvod.set("online", of: "users.alice", to: true)
    /// try await kvod.onDisconnect(.set("online", of: "users.alice", to: false))
    /// ```
    @discardableResult
    public func onDisconnect(_ write: WriteOperation) async throws -> Int64 {
        try await registerAction(write.part)
    }

    /// Registers `writes` to run as one batch (all or nothing, one revision) when the session ends.
    @discardableResult
    public func onDisconnect(batch writes: [WriteOperation]) async throws -> Int64 {
        try await registerAction(.object(["op": "batch", "ops": .array(writes.map(\.part))]))
    }

    /// Drops the action numbered `action` (nil: every action); returns how many were dropped.
    @discardableResult
    public func cancelOnDisconnect(_ action: Int64? = nil) async throws -> Int {
        let reply = try await request("cancelOnDisconnect", action.map { ["action": .int($0)] } ?? [:])
        return Int(reply["cancelled"]?.intValue ?? 0)
    }

    /// Ends the session now: its actions run and its ephemeral objects are deleted; returns how many writes ran.
    @discardableResult
    public func endSession() async throws -> Int {
        let reply = try await request("endSession")
        core.state.withLock { $0.session = nil }
        return Int(reply["ran"]?.intValue ?? 0)
    }

    private func registerAction(_ part: JSONValue) async throws -> Int64 {
        let reply = try await request("onDisconnect", ["request": part])
        guard let number = reply["action"]?.intValue else { throw KVODError.malformedReply("an 'onDisconnect' reply without action") }
        return number
    }
}
