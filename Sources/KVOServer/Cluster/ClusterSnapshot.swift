import KVOEngine
import KVOJSON

/// A node's replicated state at one applied stream sequence: what a new or far-behind node installs
/// instead of replaying the stream up to `sequence` (docs/design.md, "Snapshots and trimming").
///
/// It holds only state every node has alike (the objects, the revision, the class and binding
/// definitions, the binding id counter and the users; no history, no observations, no per-node counters), so every
/// node that snapshots sequence S encodes the same bytes, and JetStream's de-duplication keeps one copy.
///
/// Encoded as lines of compact JSON (`JSONWriter` sorts object keys, so equal states give equal bytes):
///
///     {"kvodSnapshot":1,"v":3,"seq":S,"rev":R,"lastBindingID":B,"objects":n,"classes":c,"bindings":b,"users":u}
///     ["o","id",{…},R]        one per object, by id, with the revision of its last change (absent when 0:
///                             unknown, and in snapshots of kvod before it kept one)
///     ["c","Name",{…}]        one per class, by name
///     ["b",7,{…}]             one per binding, by id
///     ["u","name",{…}]        one per user (its stored form: hash, rules, tokens), by name
///     ["x","id",[ttl,deadline]] one per object with a time to live (ms), by id; the header's `expiries`
///                             counts them (absent: none, as in snapshots of kvod before expiry)
///     ["s","id",{…}]          one per presence session (`PresenceSession.record`, replicated since engine
///                             version 5), by id; the header's `sessions` counts them (absent: none)
///
/// The header's `integrity` is what the node knew of the stream at S (`StreamIntegrity.State`: the id of the
/// entry at S, the running hash, the publishers' last batches), the same on every node that applied the same
/// stream; a node installing the snapshot goes on checking from there. An older snapshot has none.
///
/// A snapshot of engine version 2 has no `users` count and no user lines (`users` is nil): the node
/// installing it keeps its own users.
///
/// `v` is the engine version (`KVOEngine.replicationVersion`): a node refuses a snapshot of a version it
/// does not know. A value; captured on the loop thread (`init(engine:sequence:)`, copy-on-write values
/// only), encoded and decoded on any thread.
struct ClusterSnapshot: Sendable, Equatable {
    /// The format's own version (the `kvodSnapshot` member).
    static let formatVersion: Int64 = 1

    var version: Int64
    /// The last stream sequence whose entry the state includes.
    var sequence: UInt64
    var revision: UInt64
    var lastBindingID: UInt64
    var objects: [String: JSONValue]
    /// Each object's last-change revision (`ifRev`), when known (not 0).
    var changedRevisions: [String: UInt64] = [:]
    var classes: [String: JSONValue]
    var bindings: [UInt64: JSONValue]
    /// Every user, sorted by name (replicated state since engine version 3); nil in an older snapshot.
    var users: [UserRecord]?
    /// What the node knew of the stream at `sequence`; nil in an older snapshot.
    var integrity: StreamIntegrity.State?
    /// The objects' times to live (`KVOEngine+Expiry`), by object.
    var expiries: [String: Expiry] = [:]
    /// The replicated presence sessions' records (`PresenceSession.record`), by id.
    var sessions: [String: JSONValue] = [:]

    init(version: Int64 = KVOEngine.replicationVersion, sequence: UInt64, revision: UInt64, lastBindingID: UInt64,
         objects: [String: JSONValue], classes: [String: JSONValue], bindings: [UInt64: JSONValue],
         users: [UserRecord]? = [], integrity: StreamIntegrity.State? = nil) {
        self.version = version
        self.sequence = sequence
        self.revision = revision
        self.lastBindingID = lastBindingID
        self.objects = objects
        self.classes = classes
        self.bindings = bindings
        self.users = users
        self.integrity = integrity
    }

    /// The engine's state as it is now, after applying stream entry `sequence`. Loop thread: O(objects)
    /// dictionary inserts of copy-on-write values; the encoding (the costly part) can then run elsewhere.
    init(engine: KVOEngine, users: UserDirectory, sequence: UInt64, integrity: StreamIntegrity.State? = nil,
         sessions: [String: JSONValue] = [:]) {
        var objects: [String: JSONValue] = [:]
        objects.reserveCapacity(engine.objectCount)
        var changed: [String: UInt64] = [:]
        for id in engine.objectIDs() {
            if let value = try? engine.get(id, keyPath: nil) { objects[id] = value }
            if let revision = engine.changedRevision(of: id), revision > 0 { changed[id] = revision }
        }
        self.init(sequence: sequence, revision: engine.revision, lastBindingID: engine.lastBindingID,
                  objects: objects, classes: engine.classDefinitionsByName(), bindings: engine.bindingDefinitionsByID(),
                  users: users.users, integrity: integrity)
        changedRevisions = changed
        expiries = engine.expiryEntries
        self.sessions = sessions
    }

    /// The state as `KVOEngine(restoring:)` and `SQLiteStore.replaceAll` take it (no history).
    var persistedState: PersistedState {
        var table = ObjectTable(packing: objects)
        for (id, changed) in changedRevisions { table.setChangedRevision(id, changed) }
        var state = PersistedState(objects: table, revision: revision, history: [], classes: classes, bindings: bindings,
                                   lastBindingID: lastBindingID)
        state.expiries = expiries
        return state
    }

    /// The sessions as values (records that are not one were refused by `decode`).
    var presenceSessions: [PresenceSession] {
        sessions.keys.sorted().compactMap { PresenceSession(id: $0, record: sessions[$0]!) }
    }

    func encoded() -> [UInt8] {
        var bytes: [UInt8] = []
        let header = JSONValue.object([
            "kvodSnapshot": .int(ClusterSnapshot.formatVersion), "v": .int(version),
            "seq": .int(Int64(bitPattern: sequence)), "rev": .int(Int64(bitPattern: revision)),
            "lastBindingID": .int(Int64(bitPattern: lastBindingID)),
            "objects": .int(Int64(objects.count)), "classes": .int(Int64(classes.count)),
            "bindings": .int(Int64(bindings.count)),
        ].merging(users.map { ["users": .int(Int64($0.count))] } ?? [:]) { $1 }
         .merging(expiries.isEmpty ? [:] : ["expiries": .int(Int64(expiries.count))]) { $1 }
         .merging(sessions.isEmpty ? [:] : ["sessions": .int(Int64(sessions.count))]) { $1 }
         .merging(integrity.map { ["integrity": StreamIntegrity.json($0)] } ?? [:]) { $1 })
        JSONWriter.write(header, into: &bytes)
        bytes.append(0x0A)
        for id in objects.keys.sorted() {
            var record: [JSONValue] = [.string("o"), .string(id), objects[id]!]
            if let changed = changedRevisions[id] { record.append(.int(Int64(bitPattern: changed))) }
            JSONWriter.write(.array(record), into: &bytes)
            bytes.append(0x0A)
        }
        for name in classes.keys.sorted() {
            JSONWriter.write(.array([.string("c"), .string(name), classes[name]!]), into: &bytes)
            bytes.append(0x0A)
        }
        for id in bindings.keys.sorted() {
            JSONWriter.write(.array([.string("b"), .int(Int64(bitPattern: id)), bindings[id]!]), into: &bytes)
            bytes.append(0x0A)
        }
        for user in users ?? [] {
            JSONWriter.write(.array([.string("u"), .string(user.name), user.json]), into: &bytes)
            bytes.append(0x0A)
        }
        for id in expiries.keys.sorted() {
            let expiry = expiries[id]!
            JSONWriter.write(.array([.string("x"), .string(id), .array([.int(expiry.ttl), .int(expiry.deadline)])]), into: &bytes)
            bytes.append(0x0A)
        }
        for id in sessions.keys.sorted() {
            JSONWriter.write(.array([.string("s"), .string(id), sessions[id]!]), into: &bytes)
            bytes.append(0x0A)
        }
        return bytes
    }

    /// Decodes `encoded()`'s bytes; anything else (another format, a version this engine does not know,
    /// a line that does not parse, counts that do not match the lines) throws.
    static func decode(_ bytes: [UInt8]) throws(ClusterSnapshotError) -> ClusterSnapshot {
        var lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: false)
        guard lines.last?.isEmpty == true else { throw .malformed("the snapshot does not end with a newline") }
        lines.removeLast()
        guard let first = lines.first else { throw .malformed("the snapshot is empty") }
        let header = try parse(first, line: 1)
        guard case .int(formatVersion)? = header["kvodSnapshot"] else { throw .malformed("not a kvod snapshot (no 'kvodSnapshot' 1)") }
        guard case let .int(version)? = header["v"] else { throw .malformed("no engine version 'v'") }
        guard KVOEngine.oldestReplicationVersion...KVOEngine.replicationVersion ~= version else {
            throw .unknownVersion(version)
        }
        guard case let .int(sequence)? = header["seq"], sequence >= 1, case let .int(revision)? = header["rev"], revision >= 0,
              case let .int(lastBindingID)? = header["lastBindingID"], lastBindingID >= 0,
              case let .int(objectCount)? = header["objects"], case let .int(classCount)? = header["classes"],
              case let .int(bindingCount)? = header["bindings"]
        else { throw .malformed("the header lacks 'seq', 'rev', 'lastBindingID' or the counts") }
        var userCount: Int64?
        switch header["users"] {
        case nil: guard version < 3 else { throw .malformed("the header lacks the 'users' count") }
        case let .int(count)?: userCount = count
        default: throw .malformed("the header's 'users' is not a count")
        }
        var expiryCount: Int64 = 0
        switch header["expiries"] {
        case nil: break
        case let .int(count)? where count >= 0: expiryCount = count
        default: throw .malformed("the header's 'expiries' is not a count")
        }
        var sessionCount: Int64 = 0
        switch header["sessions"] {
        case nil: break
        case let .int(count)? where count >= 0: sessionCount = count
        default: throw .malformed("the header's 'sessions' is not a count")
        }
        let records = objectCount + classCount + bindingCount + (userCount ?? 0) + expiryCount + sessionCount
        guard records == Int64(lines.count - 1) else {
            throw .malformed("the header counts \(records) records, the snapshot holds \(lines.count - 1)")
        }
        var integrity: StreamIntegrity.State?
        if let stated = header["integrity"] {
            guard let state = StreamIntegrity.state(from: stated) else { throw .malformed("the header's 'integrity' is not valid") }
            integrity = state
        }
        var snapshot = ClusterSnapshot(version: version, sequence: UInt64(sequence), revision: UInt64(revision),
                                       lastBindingID: UInt64(lastBindingID), objects: [:], classes: [:], bindings: [:],
                                       users: userCount.map { _ in [] }, integrity: integrity)
        snapshot.objects.reserveCapacity(Int(objectCount))
        for (offset, line) in lines.dropFirst().enumerated() {
            let number = offset + 2
            guard case let .array(record) = try parse(line, line: number), record.count == 3 || record.count == 4,
                  case let .string(kind) = record[0], record.count == 3 || kind == "o" else {
                throw .malformed("line \(number) is not a record")
            }
            switch (kind, record[1], record[2]) {
            case let ("o", .string(id), value):
                guard case .object = value, snapshot.objects.updateValue(value, forKey: id) == nil else {
                    throw .malformed("line \(number): object '\(id)' is repeated or not a JSON object")
                }
                if record.count == 4 {
                    guard case let .int(changed) = record[3], changed > 0 else {
                        throw .malformed("line \(number): object '\(id)' has a revision that is not a positive integer")
                    }
                    snapshot.changedRevisions[id] = UInt64(changed)
                }
            case let ("c", .string(name), definition):
                guard snapshot.classes.updateValue(definition, forKey: name) == nil else { throw .malformed("line \(number): class '\(name)' is repeated") }
            case let ("b", .int(id), definition) where id >= 1:
                guard snapshot.bindings.updateValue(definition, forKey: UInt64(id)) == nil else { throw .malformed("line \(number): binding \(id) is repeated") }
            case let ("u", .string(name), stored) where snapshot.users != nil:
                let user: UserRecord
                do { user = try UserRecord(json: stored) } catch { throw .malformed("line \(number): user '\(name)': \(error.message)") }
                guard user.name == name, snapshot.users!.last.map({ $0.name < name }) ?? true else {
                    throw .malformed("line \(number): user '\(name)' is repeated, out of order or misnamed")
                }
                snapshot.users!.append(user)
            case let ("x", .string(id), .array(times)):
                guard times.count == 2, case let .int(ttl) = times[0], case let .int(deadline) = times[1],
                      (1...KVOEngine.maximumTTL).contains(ttl), snapshot.objects[id] != nil,
                      snapshot.expiries.updateValue(Expiry(ttl: ttl, deadline: deadline), forKey: id) == nil else {
                    throw .malformed("line \(number): the expiry of '\(id)' is repeated, invalid or of no object")
                }
            case let ("s", .string(id), record):
                guard PresenceSession(id: id, record: record) != nil, snapshot.sessions.updateValue(record, forKey: id) == nil else {
                    throw .malformed("line \(number): session '\(PrintableText.escaped(id, limit: 64))' is repeated or not a session's record")
                }
            default:
                throw .malformed("line \(number) is not an object, class, binding or user record")
            }
        }
        guard snapshot.objects.count == Int(objectCount), snapshot.classes.count == Int(classCount),
              snapshot.bindings.count == Int(bindingCount), (snapshot.users?.count ?? 0) == Int(userCount ?? 0),
              snapshot.expiries.count == Int(expiryCount), snapshot.sessions.count == Int(sessionCount)
        else { throw .malformed("the records do not match the header's counts") }
        return snapshot
    }

    private static func parse(_ line: ArraySlice<UInt8>, line number: Int) throws(ClusterSnapshotError) -> JSONValue {
        do {
            return try JSONParser.parse(Array(line))
        } catch {
            throw .malformed("line \(number) is not JSON: \(error)")
        }
    }
}

/// Why a snapshot (or one of its chunks) is not one this node may install.
enum ClusterSnapshotError: Error, Equatable, CustomStringConvertible {
    case malformed(String)
    /// Of an engine version this kvod does not know.
    case unknownVersion(Int64)
    /// The chunks put together do not have the SHA-256 (or the length) their headers announce.
    case hashMismatch(expected: String, found: String)

    var description: String {
        switch self {
        case let .malformed(reason): return "malformed snapshot: \(reason)"
        case let .unknownVersion(version):
            return "a snapshot of engine version \(version); this kvod knows versions \(KVOEngine.oldestReplicationVersion)...\(KVOEngine.replicationVersion) only"
        case let .hashMismatch(expected, found): return "the snapshot's SHA-256 is \(found), its chunks announce \(expected)"
        }
    }
}
