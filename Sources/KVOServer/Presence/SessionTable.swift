import KVOJSON
import KVOModel

/// Every session of this server (docs/protocol.md, "Presence"), by id, by connection, and by ephemeral
/// object; with the limits (`SessionLimits`) checked as each thing is added and the ids whose stored
/// record changed since the last group commit (`uncommitted`).
///
/// On a single node the table is the server's own. In cluster mode it is replicated state: changed only by
/// applying stream entries (`…Replicated`), equal on every node but for which of this node's connections holds
/// a session (`bind`, `unbind`). Owned by the `Server`; loop thread only. Errors are `KVOError`, as replies carry them.
struct SessionTable {
    private(set) var sessions: [String: PresenceSession] = [:]
    private var byConnection: [ConnectionID: String] = [:]
    /// The session each ephemeral object belongs to.
    private var ephemeralOwners: [String: String] = [:]
    private var sessionsByUser: [String: Int] = [:]
    /// The bytes of each user's actions.
    private var actionBytesByUser: [String: Int] = [:]
    /// The bytes of every session's actions.
    private(set) var totalActionBytes = 0
    /// Ids of the sessions whose stored record changed (made, changed or ended) since the last group commit;
    /// kept only when `recordsChanges` (a store that keeps writes).
    var uncommitted = Set<String>()
    /// Whether changes are collected for the store (false with `--in-memory`: nothing would take them).
    var recordsChanges = true

    init(recordsChanges: Bool) {
        self.recordsChanges = recordsChanges
    }

    private mutating func changed(_ id: String) {
        if recordsChanges { uncommitted.insert(id) }
    }

    var count: Int { sessions.count }
    var isEmpty: Bool { sessions.isEmpty }
    /// The objects whose removal the engine must report: the sessions' ephemeral objects.
    var watchedObjectIDs: [String] { Array(ephemeralOwners.keys) }

    /// The id of the session `connection` is attached to.
    func sessionID(of connection: ConnectionID) -> String? {
        byConnection[connection]
    }

    func session(_ id: String) -> PresenceSession? {
        sessions[id]
    }

    /// A new session for `connection`, acting for `user`, outliving its connection by `grace` ms.
    mutating func begin(user: String?, grace: Int64, connection: ConnectionID) throws(KVOError) -> PresenceSession {
        if let current = byConnection[connection] {
            throw KVOError(.badRequest, "this connection already has session \(current): end it ('endSession') or open another connection")
        }
        try checkRoom(for: user)
        var id = PresenceSession.newID()
        while sessions[id] != nil { id = PresenceSession.newID() }
        let session = PresenceSession(id: id, user: user, grace: grace, connection: connection)
        insert(session)
        byConnection[connection] = id
        changed(id)
        return session
    }

    /// Refuses another session for `user` past the limits.
    private func checkRoom(for user: String?) throws(KVOError) {
        guard sessions.count < SessionLimits.maximumSessions else {
            throw KVOError(.tooLarge, "this server holds \(SessionLimits.maximumSessions) sessions, its most",
                           details: ["limit": .int(Int64(SessionLimits.maximumSessions))])
        }
        if let user, sessionsByUser[user, default: 0] >= SessionLimits.maximumSessionsPerUser {
            throw KVOError(.tooLarge, "user '\(user)' holds \(SessionLimits.maximumSessionsPerUser) sessions, the most one user may",
                           details: ["limit": .int(Int64(SessionLimits.maximumSessionsPerUser))])
        }
    }

    /// Attaches session `id` to `connection` (which has no other). A session of another user, or none, is
    /// `not_found` alike. Returns the session and the connection it was taken from, if it was attached.
    mutating func resume(_ id: String, user: String?, connection: ConnectionID,
                         grace: Int64?) throws(KVOError) -> (session: PresenceSession, takenFrom: ConnectionID?) {
        guard var session = sessions[id], session.user == user else {
            throw KVOError(.notFound, "no session '\(id)' (it ended and its actions ran, or it never was)")
        }
        if let current = byConnection[connection], current != id {
            throw KVOError(.badRequest, "this connection already has session \(current): end it ('endSession') or open another connection")
        }
        let previous = session.connection
        if let previous, previous != connection { byConnection[previous] = nil }
        session.connection = connection
        session.deadline = nil
        if let grace, grace != session.grace {
            session.grace = grace
            changed(id)
        }
        sessions[id] = session
        byConnection[connection] = id
        return (session, previous == connection ? nil : previous)
    }

    /// Adds an `onDisconnect` action to the session of `connection` (acting for `user`); returns its number.
    mutating func addAction(_ line: [UInt8], connection: ConnectionID, user: String?) throws(KVOError) -> UInt64 {
        try addAction(line, toSession: try attachedSession(of: connection, user: user))
    }

    /// Adds an `onDisconnect` action to session `id` (which exists); returns its number.
    mutating func addAction(_ line: [UInt8], toSession id: String) throws(KVOError) -> UInt64 {
        var session = sessions[id]!
        guard session.actions.count < SessionLimits.maximumActionsPerSession else {
            throw KVOError(.tooLarge, "a session holds at most \(SessionLimits.maximumActionsPerSession) onDisconnect actions",
                           details: ["limit": .int(Int64(SessionLimits.maximumActionsPerSession))])
        }
        guard totalActionBytes + line.count <= SessionLimits.maximumTotalActionBytes else {
            throw KVOError(.tooLarge, "the server's sessions hold \(SessionLimits.maximumTotalActionBytes) bytes of onDisconnect actions, their most",
                           details: ["limit": .int(Int64(SessionLimits.maximumTotalActionBytes))])
        }
        if let user = session.user, actionBytesByUser[user, default: 0] + line.count > SessionLimits.maximumActionBytesPerUser {
            throw KVOError(.tooLarge, "user '\(user)' holds \(SessionLimits.maximumActionBytesPerUser) bytes of onDisconnect actions, the most one user may",
                           details: ["limit": .int(Int64(SessionLimits.maximumActionBytesPerUser))])
        }
        let number = session.nextActionID
        session.nextActionID += 1
        session.actions.append(PresenceSession.Action(id: number, line: line))
        countActionBytes(line.count, of: session.user)
        sessions[id] = session
        changed(id)
        return number
    }

    /// Drops action `number` (nil: all) of the session of `connection`; returns how many went.
    mutating func cancelActions(_ number: UInt64?, connection: ConnectionID, user: String?) throws(KVOError) -> Int {
        cancelActions(number, ofSession: try attachedSession(of: connection, user: user))
    }

    /// Drops action `number` (nil: all) of session `id` (which exists); returns how many went.
    mutating func cancelActions(_ number: UInt64?, ofSession id: String) -> Int {
        var session = sessions[id]!
        let before = session.actions.count
        let bytesBefore = session.actionBytes
        if let number { session.actions.removeAll { $0.id == number } } else { session.actions.removeAll() }
        let removed = before - session.actions.count
        guard removed > 0 else { return 0 }
        countActionBytes(session.actionBytes - bytesBefore, of: session.user)
        sessions[id] = session
        changed(id)
        return removed
    }

    /// Refuses an ephemeral create from `connection` unless it has a session with room for one more
    /// ephemeral object; returns the session's id.
    func admitEphemeral(from connection: ConnectionID, user: String?) throws(KVOError) -> String {
        let id = try attachedSession(of: connection, user: user)
        guard sessions[id]!.ephemeralObjects.count < SessionLimits.maximumEphemeralObjectsPerSession else {
            throw KVOError(.tooLarge, "a session holds at most \(SessionLimits.maximumEphemeralObjectsPerSession) ephemeral objects",
                           details: ["limit": .int(Int64(SessionLimits.maximumEphemeralObjectsPerSession))])
        }
        return id
    }

    /// `object`, just created ephemeral, belongs to session `id` (if it still exists: in cluster mode the
    /// create is applied after the stream, when its session may have ended).
    mutating func addEphemeral(_ object: String, to id: String) -> Bool {
        guard var session = sessions[id], ephemeralOwners[object] == nil else { return false }
        session.ephemeralObjects.append(object)
        sessions[id] = session
        ephemeralOwners[object] = id
        changed(id)
        return true
    }

    /// `object` was deleted (by anyone, by any path): it is no longer any session's to delete.
    mutating func objectRemoved(_ object: String) {
        guard let id = ephemeralOwners.removeValue(forKey: object), var session = sessions[id] else { return }
        session.ephemeralObjects.removeAll { $0 == object }
        sessions[id] = session
        changed(id)
    }

    /// `connection` closed: its session (if any) is detached and ends at `now` plus its grace.
    mutating func detach(_ connection: ConnectionID, now: UInt64) {
        guard let id = byConnection.removeValue(forKey: connection), var session = sessions[id] else { return }
        session.connection = nil
        session.deadline = now &+ UInt64(session.grace)
        sessions[id] = session
    }

    /// The detached sessions whose grace is over at `now`, oldest deadline first.
    func due(now: UInt64) -> [String] {
        var due: [(UInt64, String)] = []
        for (id, session) in sessions {
            if let deadline = session.deadline, deadline <= now { due.append((deadline, id)) }
        }
        return due.sorted { $0.0 < $1.0 || ($0.0 == $1.0 && $0.1 < $1.1) }.map(\.1)
    }

    /// Whether any session is detached (the housekeeping tick looks for due ones only then).
    var hasDetached: Bool { byConnection.count < sessions.count }

    /// Sessions no connection holds.
    var detachedCount: Int { sessions.count - byConnection.count }

    /// Ends session `id`: it leaves the table (its record is deleted at the next group commit) and is
    /// returned, for its actions to run.
    mutating func end(_ id: String) -> PresenceSession? {
        guard let session = sessions.removeValue(forKey: id) else { return nil }
        if let connection = session.connection, byConnection[connection] == id { byConnection[connection] = nil }
        for object in session.ephemeralObjects where ephemeralOwners[object] == id { ephemeralOwners[object] = nil }
        if let user = session.user {
            let left = sessionsByUser[user, default: 1] - 1
            sessionsByUser[user] = left > 0 ? left : nil
        }
        countActionBytes(-session.actionBytes, of: session.user)
        changed(id)
        return session
    }

    // MARK: - Cluster mode: the replicated table (docs/design.md, "Presence")
    //
    // Every node applies the same stream entries to these in the same order, so the sessions (all but
    // `connection` and `deadline`, which say which of this node's connections holds one) are equal on every
    // node. Only `bind`, `unbind` and `end`'s unbinding touch this node's connections.

    /// A session begun at stream position `epoch`, held by node incarnation `holder`.
    mutating func beginReplicated(_ id: String, user: String?, grace: Int64, holder: String,
                                  epoch: UInt64) throws(KVOError) -> PresenceSession {
        guard sessions[id] == nil else { throw KVOError(.conflict, "session id \(id) is taken: begin again") }
        try checkRoom(for: user)
        var session = PresenceSession(id: id, user: user, grace: grace, connection: nil)
        session.holder = holder
        session.epoch = epoch
        insert(session)
        changed(id)
        return session
    }

    /// Session `id` resumed at stream position `epoch` through node incarnation `holder`: a new attachment
    /// (whatever connection of this node held it lets go: returned). Another user's, or none, is `not_found`.
    mutating func attachReplicated(_ id: String, user: String?, grace: Int64?, holder: String,
                                   epoch: UInt64) throws(KVOError) -> (session: PresenceSession, takenFrom: ConnectionID?) {
        guard var session = sessions[id], session.user == user else {
            throw KVOError(.notFound, "no session '\(id)' (it ended and its actions ran, or it never was)")
        }
        let previous = session.connection
        if let previous, byConnection[previous] == id { byConnection[previous] = nil }
        session.connection = nil
        session.holder = holder
        session.epoch = epoch
        session.detachedAt = nil
        if let grace { session.grace = grace }
        sessions[id] = session
        changed(id)
        return (session, previous)
    }

    /// Session `id`'s attachment `epoch` ended at the stream's active time `time` (its connection closed): it is
    /// detached, ending `grace` after `time`. Nothing when a later attachment took it over.
    mutating func detachReplicated(_ id: String, epoch: UInt64, at time: Int64) {
        guard var session = sessions[id], session.epoch == epoch, session.holder != nil else { return }
        session.holder = nil
        session.detachedAt = time
        sessions[id] = session
        changed(id)
    }

    /// This node's `connection` holds session `id` (its `session` entry was applied here).
    mutating func bind(_ id: String, to connection: ConnectionID) {
        guard var session = sessions[id], byConnection[connection] == nil else { return }
        session.connection = connection
        sessions[id] = session
        byConnection[connection] = id
    }

    /// This node's `connection` closed or let go: the session it held, if any, is no longer held here.
    mutating func unbind(_ connection: ConnectionID) -> PresenceSession? {
        guard let id = byConnection.removeValue(forKey: connection), var session = sessions[id] else { return nil }
        session.connection = nil
        sessions[id] = session
        return session
    }

    /// Sessions held by `holder` (this node's incarnation) that none of its connections holds: their
    /// detach is to be appended.
    func unheld(by holder: String) -> [PresenceSession] {
        sessions.values.filter { $0.holder == holder && $0.connection == nil }
    }

    /// Whether any session is held by `holder`.
    func holdsAny(_ holder: String) -> Bool {
        sessions.values.contains { $0.holder == holder }
    }

    /// The sessions whose replicated deadline is at or before `now` (the stream's active time): `holderTime`
    /// gives a holder's last batch's.
    func dueReplicated(now: Int64, window: Int64, holderTime: (String) -> Int64?) -> [PresenceSession] {
        sessions.values.filter { session in
            session.replicatedDeadline(holderTime: session.holder.flatMap(holderTime), window: window) <= now
        }.sorted { $0.id < $1.id }
    }

    /// Sessions read back from the store at start-up: every one detached, ending at `now` plus its grace.
    mutating func restore(_ stored: [PresenceSession], now: UInt64) {
        for var session in stored {
            session.connection = nil
            session.deadline = now &+ UInt64(session.grace)
            insert(session)
            for object in session.ephemeralObjects { ephemeralOwners[object] = session.id }
        }
    }

    private mutating func insert(_ session: PresenceSession) {
        sessions[session.id] = session
        if let user = session.user { sessionsByUser[user, default: 0] += 1 }
        countActionBytes(session.actionBytes, of: session.user)
    }

    private mutating func countActionBytes(_ change: Int, of user: String?) {
        totalActionBytes += change
        guard let user, change != 0 else { return }
        let bytes = actionBytesByUser[user, default: 0] + change
        actionBytesByUser[user] = bytes > 0 ? bytes : nil
    }

    /// The session `connection` holds, refused when there is none or when it is another user's (the connection
    /// logged in again as someone else since it began the session: its actions would run with the first user's rights).
    private func attachedSession(of connection: ConnectionID, user: String?) throws(KVOError) -> String {
        guard let id = byConnection[connection] else {
            throw KVOError(.badRequest, "this connection has no session: begin one with {\"op\":\"session\"}")
        }
        guard sessions[id]?.user == user else {
            throw KVOError(.badRequest, "this connection's session was begun by another user: end it ('endSession') first")
        }
        return id
    }
}
