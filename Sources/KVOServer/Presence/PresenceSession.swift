import CSodium
import KVOJSON
import KVOModel

/// One client session (docs/protocol.md, "Presence"): whose it is, how long it outlives its connection, and
/// what runs when it ends (its `onDisconnect` actions, then the deletion of its ephemeral objects).
///
/// A value held by `SessionTable`, which the server owns; loop thread only. What is stored (`record`) is
/// what a restart needs to run the actions: the connection and the deadline are not stored (after a
/// restart every session is detached, with its grace from the restart).
struct PresenceSession: Equatable {
    /// An `onDisconnect` write: its number in the session and its request, as canonical JSON (no `id`).
    struct Action: Equatable {
        let id: UInt64
        let line: [UInt8]
    }

    /// 32 lowercase hex digits of 16 random bytes: a capability (with users defined a resume also needs
    /// the session's user).
    let id: String
    /// Whose rights its actions run with (nil: made in open mode).
    let user: String?
    /// How long, in milliseconds, it outlives its connection.
    var grace: Int64
    var actions: [Action] = []
    /// The ephemeral objects it created and that still exist, in creation order.
    var ephemeralObjects: [String] = []
    /// The number the next action gets (numbers are never reused within a session).
    var nextActionID: UInt64 = 1
    /// The connection it is attached to (nil: detached, ending at `deadline`). Not stored.
    var connection: ConnectionID?
    /// `uv_now` milliseconds at which a detached session ends. Not stored.
    var deadline: UInt64?
    /// Cluster mode (replicated, stored, in snapshots; docs/design.md, "Presence"): the node incarnation
    /// (publisher, `node.incarnation`) holding it, nil once detached; the stream sequence of its last `session`
    /// or resume (its attachment's epoch); the stream's active time (ms, `StreamIntegrity.activeTime`) at its
    /// detach. Unused on a single node.
    var holder: String?
    var epoch: UInt64 = 0
    var detachedAt: Int64?

    /// Cluster mode: the stream's active time (ms) from which it may be ended, given its holder's last batch's
    /// (`StreamIntegrity.PublisherMark.time`): a held session once its holder has appended nothing for
    /// `window` ms, plus its grace; a detached one its grace after its detach.
    func replicatedDeadline(holderTime: Int64?, window: Int64) -> Int64 {
        if holder != nil { return (holderTime ?? 0) &+ window &+ grace }
        return (detachedAt ?? 0) &+ grace
    }

    /// The bytes its actions' requests take.
    var actionBytes: Int { actions.reduce(0) { $0 + $1.line.count } }

    /// A new session id (`randombytes_buf`).
    static func newID() -> String {
        var bytes = [UInt8](repeating: 0, count: 16)
        randombytes_buf(&bytes, bytes.count)
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(32)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// Whether `text` has the form of a session id (it may still name no session).
    static func isWellFormedID(_ text: String) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    /// What the store keeps: `{"user":…,"grace":ms,"next":n,"actions":[[n,{request}],…],"ephemeral":[ids]}`.
    var record: JSONValue {
        var members: [String: JSONValue] = [
            "grace": .int(grace),
            "next": .int(Int64(nextActionID)),
            "actions": .array(actions.map { action in
                .array([.int(Int64(action.id)), (try? JSONParser.parse(action.line)) ?? .null])
            }),
            "ephemeral": .array(ephemeralObjects.map { .string($0) }),
        ]
        if let user { members["user"] = .string(user) }
        if epoch > 0 {
            members["epoch"] = .int(Int64(bitPattern: epoch))
            if let holder { members["holder"] = .string(holder) }
            if let detachedAt { members["detached"] = .int(detachedAt) }
        }
        return .object(members)
    }

    /// A stored session (`record`), detached; nil when the record is not one.
    init?(id: String, record: JSONValue) {
        guard PresenceSession.isWellFormedID(id), case let .object(members) = record,
              case let .int(grace)? = members["grace"], grace >= 0,
              case let .int(next)? = members["next"], next >= 1,
              case let .array(actions)? = members["actions"], case let .array(ephemeral)? = members["ephemeral"]
        else { return nil }
        switch members["user"] {
        case nil: user = nil
        case let .string(name)?: user = name
        default: return nil
        }
        self.id = id
        self.grace = grace
        nextActionID = UInt64(next)
        for action in actions {
            guard case let .array(pair) = action, pair.count == 2, case let .int(number) = pair[0], number >= 1,
                  case .object = pair[1] else { return nil }
            self.actions.append(Action(id: UInt64(number), line: JSONWriter.bytes(pair[1])))
        }
        for object in ephemeral {
            guard case let .string(name) = object else { return nil }
            ephemeralObjects.append(name)
        }
        switch (members["epoch"], members["holder"], members["detached"]) {
        case (nil, nil, nil):
            break
        case let (.int(epoch)?, holder, detached) where epoch > 0:
            self.epoch = UInt64(epoch)
            switch (holder, detached) {
            case let (.string(name)?, nil): self.holder = name
            case let (nil, .int(time)?): detachedAt = time
            default: return nil
            }
        default:
            return nil
        }
    }

    init(id: String, user: String?, grace: Int64, connection: ConnectionID?) {
        self.id = id
        self.user = user
        self.grace = grace
        self.connection = connection
    }
}
