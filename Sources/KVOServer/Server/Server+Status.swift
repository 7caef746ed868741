import KVOEngine
import KVOJSON
import KVOModel
import KVOVersion

/// The `status` operation's reply (docs/protocol.md, `status`): the server at a glance, as Redis's `INFO` and etcd's
/// `endpoint status` give it. `statusReport()` is the one place that assembles it: a part of the server that has
/// something to report adds its section here (one function per section below), and nowhere else. Nothing here
/// is on a request's path but `status`'s own; the store's sizes are two `stat`s and a `statvfs`, as a `/metrics`
/// scrape reads them.
///
/// Loop thread only, like the rest of `Server`.
extension Server {
    /// Every field of `status`'s reply, sorted by the reply encoder.
    func statusReport() -> [(String, JSONValue)] {
        let engine = handler.engine
        return [
            ("version", .string(KVODVersion.version)),
            ("commit", .string(configuration.buildCommit)),
            ("uptimeSeconds", .double(Double(clock.milliseconds &- startedAt.milliseconds) / 1000)),
            ("started", .int(startedAt.wallMilliseconds)),
            ("rev", .int(Int64(engine.revision))),
            ("objects", .int(Int64(engine.objectCount))),
            ("observations", .int(Int64(engine.observationCount))),
            ("listeners", .array(listeners.map { .object(["role": .string(Self.roleName($0.role)), "address": .string($0.addressDescription)]) })),
            ("connections", connectionsSection()),
            ("sessions", .object(["total": .int(Int64(sessions.count)), "detached": .int(Int64(sessions.detachedCount))])),
            ("storage", storageSection()),
            ("history", historySection(engine)),
            ("lastBackup", lastBackupSection()),
            ("cluster", clusterSection()),
            ("alarms", .array(alarms())),
        ]
    }

    /// A listener's role as `status` names it: the flag that made it.
    private static func roleName(_ role: ListenerRole) -> String {
        switch role {
        case .plain: "port"
        case .tls: "tls-port"
        case .http: "http-port"
        case .unix: "unix"
        }
    }

    /// Open connections, in all and by what they speak (`ConnectionKind`: tcp, tls, unix, http, websocket), the
    /// asking one included.
    private func connectionsSection() -> JSONValue {
        var section: [String: JSONValue] = ["total": .int(Int64(openConnections))]
        for kind in ConnectionKind.allCases { section[kind.label] = .int(Int64(metrics.connectionsOpen[kind.rawValue])) }
        return .object(section)
    }

    /// Whether writes are stored and kept (`StorageHealth`), and the files' sizes (`Store.usage()`; null for a
    /// figure that could not be read, absent without a data directory).
    private func storageSection() -> JSONValue {
        var section: [String: JSONValue] = [
            "kind": .string(storage.keepsWrites ? "sqlite" : "memory"),
            "state": .string(storage.health.stateName),
        ]
        if let reason = storage.health.reason { section["reason"] = .string(reason) }
        if let directory = configuration.storage?.directory { section["directory"] = .string(directory) }
        if let usage = store.usage() {
            let figure = { (bytes: Int?) -> JSONValue in bytes.map { .int(Int64($0)) } ?? .null }
            section["databaseBytes"] = figure(usage.databaseBytes)
            section["walBytes"] = figure(usage.walBytes)
            section["fileSystemFreeBytes"] = figure(usage.freeBytes)
            section["fileSystemBytes"] = figure(usage.sizeBytes)
        }
        if let limit = configuration.storage?.maximumDiskBytes, limit > 0 { section["maxDiskBytes"] = .int(Int64(limit)) }
        return .object(section)
    }

    /// The revisions a resume (`observe` with `sinceRev`) can start from: `oldestRev - 1` through `newestRev`.
    private func historySection(_ engine: KVOEngine) -> JSONValue {
        .object([
            "oldestRev": engine.oldestHistoryRevision.map { .int(Int64($0)) } ?? .null,
            "newestRev": .int(Int64(engine.revision)),
            "changes": .int(Int64(engine.historyCount)),
            "bytes": .int(Int64(engine.historyBytes)),
        ])
    }

    /// The last backup this server streamed whole over the network (`backup`, `Server+Backup`): when (the
    /// server's clock, milliseconds since the epoch), at which revision, how many objects and bytes; null when none
    /// was taken since the start. A local `kvod backup` reads the files without the server and is not in it.
    private func lastBackupSection() -> JSONValue {
        guard let last = lastBackup else { return .null }
        return .object([
            "finished": .int(Int64(clamping: last.finishedAtMilliseconds)),
            "rev": .int(Int64(clamping: last.revision)),
            "objects": .int(Int64(last.objects)),
            "bytes": .int(Int64(last.bytes)),
        ])
    }

    /// In cluster mode, this node's place in the stream and what the other nodes' checkpoints say (as `digest`
    /// reports them); null on a single node. Every node is a peer of the stream (there is no leader): `state` says
    /// whether this one applies it.
    private func clusterSection() -> JSONValue {
        guard let cluster, let status = handler.clusterStatus?() else { return .null }
        let peers = status.peers.map { peer -> JSONValue in
            var members: [String: JSONValue] = [
                "node": .string(peer.node), "applied": .int(Int64(bitPattern: peer.sequence)),
                "agrees": peer.agrees.map(JSONValue.bool) ?? .null,
            ]
            if let revision = peer.revision { members["rev"] = .int(Int64(bitPattern: revision)) }
            return .object(members)
        }
        return .object([
            "node": .string(status.node),
            "stream": .string(cluster.configuration.stream),
            "state": .string(status.health ?? "applying"),
            "applied": .int(Int64(bitPattern: status.applied)),
            "committed": .int(Int64(bitPattern: cluster.committedSequence)),
            "pendingWrites": .int(Int64(cluster.pendingWriteCount)),
            "peers": .array(peers),
            "peersAgreeing": .int(Int64(status.peers.count { $0.agrees == true })),
            "peersDisagreeing": .int(Int64(status.peers.count { $0.agrees == false })),
        ])
    }

    /// The critical conditions the server is in now, each `{"alarm": name, "reason": text}`: the store not taking
    /// writes (`storage_full`, `storage_failing`, `storage_lost`) and a cluster node not applying the stream
    /// (`stream_halted`, `stream_diverged`, `stream_behind`): what `/readyz` answers 503 for. Empty when all is well.
    func alarms() -> [JSONValue] {
        var alarms: [JSONValue] = []
        if let reason = storage.health.reason {
            alarms.append(.object(["alarm": .string("storage_" + storage.health.stateName), "reason": .string(reason)]))
        }
        if let cluster, let reason = cluster.health.reason {
            alarms.append(.object(["alarm": .string("stream_" + cluster.health.stateName), "reason": .string(reason)]))
        }
        return alarms
    }
}
