import KVOEngine
import KVOJSON

/// One message of the cluster's stream: the write requests one node accepted during one loop iteration,
/// as their request lines, for every node to apply in order through its engine.
///
/// Encoded as one JSON object: `{"v":1,"node":"a","batch":"a.5f3c.17","pseq":17,"ops":[{"line":"{\"op\":\"set\",…}","user":"ada"}]}`
/// (`user` only for an authenticated writer); a change to the users is `{"users":{"change":"add",…},"user":"root"}`
/// instead of a line (`UserChange`). `v` is the engine version (`KVOEngine.replicationVersion`):
/// a node refuses to apply an entry of a version it does not know.
///
/// `pseq` is the publisher sequence: the batch's number among its publisher's (one node incarnation, the
/// batch id without its last part) batches, 1, 2, 3… with no gap, so a node that applies the stream notices a
/// batch delivered twice or one missing (`StreamIntegrity`). Entries written before it existed have none.
/// A checkpoint (`"check":{"seq":S,"hash":"…"}`, no operations) is a node's claim of its running hash after
/// stream sequence S, which the other nodes compare with theirs; a node that does not know checkpoints
/// applies it as an empty batch. A value; any thread.
package struct ReplicationEntry: Sendable, Equatable {
    /// One replicated write: the request line as the client sent it, or a change to the users with
    /// its hash or token made already, and who sent it.
    package struct Operation: Sendable, Equatable {
        /// Empty for a user change.
        package var line: [UInt8]
        /// The writer's user name; nil in open mode.
        package var user: String?
        var userChange: UserChange? = nil
        /// Cluster presence (engine version 5; docs/design.md, "Presence"): what applying the operation needs
        /// besides its line. A client's presence request or ephemeral create: `{"id":session,"epoch":e}`; the
        /// server's own: `{"k":"detach"|"end","id":…,"epoch":e}` or `{"k":"alive"}`, with an empty line.
        var presence: JSONValue? = nil

        package init(line: [UInt8], user: String?) {
            self.line = line
            self.user = user
        }

        init(line: [UInt8], user: String?, userChange: UserChange?) {
            self.line = line
            self.user = user
            self.userChange = userChange
        }
    }

    package var version: Int64
    /// The node that accepted the writes.
    package var node: String
    /// The batch's id, also its JetStream message id (de-duplication of a retried publish).
    package var batch: String
    package var operations: [Operation]
    /// The batch's number among its publisher's batches (nil: an entry of an older kvod, or a checkpoint).
    package var publisherSequence: UInt64? = nil
    /// A checkpoint's claim instead of writes.
    package var checkpoint: Checkpoint? = nil
    /// The wall-clock time (ms since 1970) every node applies the writes at (deadlines of `ttl`); nil in an
    /// entry of a kvod before expiry.
    package var time: Int64? = nil

    package init(version: Int64, node: String, batch: String, operations: [Operation], publisherSequence: UInt64? = nil,
                 checkpoint: Checkpoint? = nil) {
        self.version = version
        self.node = node
        self.batch = batch
        self.operations = operations
        self.publisherSequence = publisherSequence
        self.checkpoint = checkpoint
    }

    /// A node's running hash (`StreamIntegrity.chain`) after applying stream sequence `sequence`.
    package struct Checkpoint: Sendable, Equatable {
        var sequence: UInt64
        /// 64 lowercase hex digits.
        var hash: String
        /// The node's revision after that sequence (nil from a kvod that did not say): shown to operators
        /// (`digest`'s `peers`), never compared.
        var revision: UInt64? = nil
    }

    /// The publisher of a batch id `node.incarnation.counter`: `node.incarnation` (nil: not of that form).
    var publisher: Substring? {
        guard let dot = batch.lastIndex(of: ".") else { return nil }
        return batch[..<dot]
    }

    package func encoded() -> [UInt8] {
        let ops = operations.map { operation -> JSONValue in
            var members: [String: JSONValue] = [:]
            if let change = operation.userChange {
                members["users"] = change.json
            } else {
                members["line"] = .string(String(decoding: operation.line, as: UTF8.self))
            }
            if let user = operation.user { members["user"] = .string(user) }
            if let presence = operation.presence { members["presence"] = presence }
            return .object(members)
        }
        var members: [String: JSONValue] = [
            "v": .int(version), "node": .string(node), "batch": .string(batch), "ops": .array(ops),
        ]
        if let publisherSequence { members["pseq"] = .int(Int64(bitPattern: publisherSequence)) }
        if let time { members["time"] = .int(time) }
        if let checkpoint {
            var check: [String: JSONValue] = ["seq": .int(Int64(bitPattern: checkpoint.sequence)), "hash": .string(checkpoint.hash)]
            if let revision = checkpoint.revision { check["rev"] = .int(Int64(bitPattern: revision)) }
            members["check"] = .object(check)
        }
        let value = JSONValue.object(members)
        var bytes: [UInt8] = []
        JSONWriter.write(value, into: &bytes)
        return bytes
    }

    /// Decodes a stream message; a message that is not an entry throws (with what is wrong).
    package static func decode(_ bytes: [UInt8]) throws(ReplicationEntryError) -> ReplicationEntry {
        let value: JSONValue
        do {
            value = try JSONParser.parse(bytes)
        } catch {
            throw .malformed("not JSON: \(error)")
        }
        guard case let .int(version)? = value["v"] else { throw .malformed("no engine version 'v'") }
        guard case let .string(node)? = value["node"], case let .string(batch)? = value["batch"],
              case let .array(ops)? = value["ops"]
        else { throw .malformed("missing 'node', 'batch' or 'ops'") }
        var publisherSequence: UInt64?
        if let number = value["pseq"] {
            guard case let .int(sequence) = number, sequence > 0 else { throw .malformed("'pseq' is not a positive integer") }
            publisherSequence = UInt64(sequence)
        }
        var checkpoint: Checkpoint?
        if let check = value["check"] {
            guard case let .int(sequence)? = check["seq"], sequence > 0, case let .string(hash)? = check["hash"] else {
                throw .malformed("'check' needs a positive 'seq' and a 'hash'")
            }
            var revision: UInt64?
            if let stated = check["rev"] {
                guard case let .int(rev) = stated, rev >= 0 else { throw .malformed("'check' has a 'rev' that is not a revision") }
                revision = UInt64(rev)
            }
            checkpoint = Checkpoint(sequence: UInt64(sequence), hash: hash, revision: revision)
        }
        var time: Int64?
        if let stated = value["time"] {
            guard case let .int(milliseconds) = stated else { throw .malformed("'time' is not an integer") }
            time = milliseconds
        }
        var operations: [Operation] = []
        operations.reserveCapacity(ops.count)
        for op in ops {
            var user: String?
            if let name = op["user"] {
                guard case let .string(text) = name else { throw .malformed("an operation's 'user' is not a string") }
                user = text
            }
            if let change = op["users"] {
                do throws(UserDirectoryError) {
                    operations.append(Operation(line: [], user: user, userChange: try UserChange(json: change)))
                } catch {
                    throw .malformed("a user change: \(error.message)")
                }
                continue
            }
            guard case let .string(line)? = op["line"] else { throw .malformed("an operation without 'line'") }
            var operation = Operation(line: Array(line.utf8), user: user)
            if let presence = op["presence"] {
                guard case .object = presence else { throw .malformed("an operation's 'presence' is not an object") }
                operation.presence = presence
            }
            operations.append(operation)
        }
        var entry = ReplicationEntry(version: version, node: node, batch: batch, operations: operations,
                                     publisherSequence: publisherSequence, checkpoint: checkpoint)
        entry.time = time
        return entry
    }
}

/// Why a stream message is not an entry this node can apply.
package enum ReplicationEntryError: Error, CustomStringConvertible {
    case malformed(String)

    package var description: String {
        switch self {
        case let .malformed(reason): return "malformed replication entry: \(reason)"
        }
    }
}

extension KVOEngine {
    /// The engine version written into every replication entry. Raise it whenever the engine could
    /// compute a different outcome (revision, value, event, refusal) for the same requests: a node
    /// refuses entries of a version it does not know rather than diverge.
    ///
    /// 2: bindings are replicated (`bind`, `combineLatest`, `unbind` are in the stream, and the bindings
    /// one write triggers apply in id order). A node of version 1 stops at such an entry instead of
    /// applying it in its own order.
    /// 3: changes to the users are replicated (`UserChange`); a node of version 2, which has no users
    /// in its digest and refused user management in cluster mode, stops at such an entry.
    /// 4: expiry (`ttl` on writes, `touch`, `expire`; each entry carries the publishing node's write `time`,
    /// which deadlines are computed from). A node of version 3 stops at such an entry.
    /// 5: presence sessions are replicated state (operations with `presence`: sessions, their actions, attachments,
    /// detaches and ends, decided at stream positions). A node of version 4 stops at such an entry.
    package static let replicationVersion: Int64 = 5

    /// The oldest version this engine still applies as it was computed: version 1 entries hold no binding
    /// requests (version 1 refused them before they reached the stream), and versions 1 and 2 hold no
    /// user changes (they were refused), so they compute the same here.
    package static let oldestReplicationVersion: Int64 = 1
}
