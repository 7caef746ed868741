import COpenSSL
import KVOEngine
import KVOJSON
import KVOModel

/// What a cluster node knows about the stream it applied, to notice when NATS delivers something other
/// than the stream every other node applies (docs/design.md, "Integrity of the stream"):
///
/// - **Identity.** Every batch has a publisher (one node incarnation) and a publisher sequence 1, 2, 3…
///   with no gap (`ReplicationEntry.publisherSequence`). `publishers` keeps, per publisher, the highest
///   sequence applied: a batch at or below it was applied already (a duplicate: skipped and counted,
///   never applied twice), one above it + 1 means batches of that publisher are missing. This is the set
///   of applied batch ids, kept exactly and for ever in a few bytes per publisher.
/// - **Position.** `lastBatch` is the id of the message at the applied sequence: when the node's consumer
///   starts again it is served from one entry early, and that entry must be this batch (a copy numbered
///   differently fails the check before anything of it is applied).
/// - **Content.** `chain` is a running SHA-256 over every batch applied (its id, a zero byte, its bytes,
///   chained on the previous hash). Nodes that applied the same stream up to sequence S have the same
///   chain at S; each node publishes it every `--cluster-checkpoint-every` sequences as a checkpoint
///   entry, and compares the other nodes' claims with its own (`claim(_:from:)`).
///
/// `publishers`, `lastBatch` and `chain` are stored with the applied sequence, in the same transaction
/// (`encodedState`, the `meta` row `stream_integrity`), and carried by snapshots. Loop thread only.
package final class StreamIntegrity {
    /// A publisher's last applied batch: its publisher sequence and the stream sequence it was applied at.
    package struct PublisherMark: Equatable, Sendable {
        var counter: UInt64
        var sequence: UInt64
        /// The stream's active time (`State.activeTime`) after that batch (0: unknown, from an older kvod): how
        /// recently the publisher was heard, which holds its presence sessions (docs/design.md, "Presence").
        var time: Int64 = 0
    }

    /// What to do with the entry at the next stream sequence.
    package enum Verdict: Equatable {
        /// Apply it (then call `applied`).
        case apply
        /// A batch applied before: skip it (`skipped` was called).
        case duplicate(firstAt: UInt64)
        /// Batches of its publisher are missing before it: what was applied since may differ from the
        /// other nodes'.
        case gap(String)
    }

    /// The state as stored and carried by snapshots.
    package struct State: Equatable, Sendable {
        var lastBatch: String = ""
        /// 32 bytes; all zero before anything was applied; empty when unknown (a store or snapshot of an
        /// older kvod, which kept none): the node then neither claims nor judges checkpoints.
        var chain: [UInt8] = [UInt8](repeating: 0, count: 32)
        var publishers: [String: PublisherMark] = [:]
        /// False when the publishers may be incomplete (an older store or snapshot had none, or some were
        /// forgotten to stay under `maximumPublishers`): a first batch of an unknown publisher with a
        /// sequence above 1 is then taken as it is.
        var publishersComplete = true
        /// The wall-clock time (ms) the last applied entry's writes were applied at (`applyTime(of:fallback:)`);
        /// 0 before any (or from an older kvod's store or snapshot, which kept none).
        var applyTime: Int64 = 0
        /// The stream's *active time* (ms): apply time that passed while the stream took entries, each gap
        /// between two entries counted at most `activeGapLimit` (a stream that took nothing, an outage of NATS
        /// or a lost quorum, counts as that much): presence deadlines are in it (docs/design.md, "Presence").
        var activeTime: Int64 = 0

        /// What a node knows when its store or snapshot holds no state (one of an older kvod) at `applied`:
        /// nothing, unless it has applied nothing yet.
        static func unknown(applied: UInt64) -> State {
            applied == 0 ? State() : State(lastBatch: "", chain: [], publishers: [:], publishersComplete: false)
        }

        var knowsChain: Bool { chain.count == 32 }
    }

    package private(set) var state: State
    /// Publishers remembered at most; the one whose last batch is oldest in the stream is forgotten first
    /// (a node restarted that often has long stopped publishing under its old incarnations).
    static let maximumPublishers = 512

    /// Duplicates skipped, checkpoints compared and found equal, and claims that disagreed, since start.
    private(set) var duplicatesSkipped: UInt64 = 0
    private(set) var checkpointsAgreed: UInt64 = 0
    private(set) var checkpointDisagreements: UInt64 = 0
    /// Batches taken with no continuity check (an unknown publisher with `publishersComplete` false).
    private(set) var uncheckedBatches: UInt64 = 0

    /// This node's chain at its recent checkpoints, and the claims heard for them (node → hash).
    private var ownHashes: [(sequence: UInt64, hash: String)] = []
    private var claims: [UInt64: [String: String]] = [:]
    /// Each other node's latest checkpoint claim, by node (at most `maximumClaimants` nodes): what
    /// `digest`'s `peers` shows operators.
    private var latestClaims: [String: ReplicationEntry.Checkpoint] = [:]
    /// Checkpoints remembered (own hashes and claims), and claimants heard per checkpoint at most.
    static let rememberedCheckpoints = 16
    static let maximumClaimants = 64

    /// This node's own batches: the sequence the publish acknowledgement gave, or the one it was delivered
    /// at, whichever came first (the other is compared with it when it comes).
    private var acknowledgedOwn: [String: UInt64] = [:]
    private var deliveredOwn: [String: UInt64] = [:]

    package init(_ state: State = State()) {
        self.state = state
    }

    /// The chain as 64 hex digits.
    package var chainHex: String { StreamIntegrity.hex(state.chain) }

    // MARK: - Identity

    /// The verdict for `entry` (a batch of writes, not a checkpoint), delivered at `sequence`.
    package func admit(_ entry: ReplicationEntry, at sequence: UInt64) -> Verdict {
        guard let counter = entry.publisherSequence, let publisher = entry.publisher.map(String.init) else {
            return .apply
        }
        guard let mark = state.publishers[publisher] else {
            if counter == 1 { return .apply }
            if !state.publishersComplete {
                uncheckedBatches += 1
                return .apply
            }
            return .gap("batch \(entry.batch) is its publisher's number \(counter), and none of its earlier batches was delivered to this node")
        }
        if counter <= mark.counter {
            duplicatesSkipped += 1
            return .duplicate(firstAt: mark.sequence)
        }
        if counter > mark.counter + 1 {
            return .gap("batch \(entry.batch) is its publisher's number \(counter), but the last one this node applied is number \(mark.counter) (stream sequence \(mark.sequence)): \(counter - mark.counter - 1) missing")
        }
        return .apply
    }

    /// `entry`, delivered at `sequence` as `data`, was applied: it joins the chain and its publisher's mark.
    /// The time every node applies `entry`'s writes at: its publisher's stamp (`fallback`, this node's clock,
    /// for an entry of a kvod before expiry), but never before the previous entry's (docs/design.md,
    /// "Determinism"). A write stamped on a node cut from NATS and appended late, after writes stamped later on
    /// other nodes, is applied at their time: a `touch` never moves a deadline before one a write earlier in the
    /// stream promised. Every node computes it alike, from the stream and this state.
    package func applyTime(of entry: ReplicationEntry, fallback: Int64) -> Int64 {
        max(entry.time ?? fallback, state.applyTime)
    }

    /// The stream's active time after `publisher`'s last applied batch; nil when unknown (never heard, or forgotten).
    func lastHeard(_ publisher: String) -> Int64? {
        state.publishers[publisher]?.time
    }

    /// Most of one gap between two entries' apply times that counts as active time: every node appends at
    /// least once a second while there are presence sessions, so a longer gap is a stream that took nothing.
    static let activeGapLimit: Int64 = 2_000

    /// The stream's active time an entry applied at `time` (or a node's clock at `time`) brings it to.
    func activeTime(at time: Int64) -> Int64 {
        guard state.applyTime != 0 else { return state.activeTime }
        return state.activeTime &+ min(max(time &- state.applyTime, 0), StreamIntegrity.activeGapLimit)
    }

    /// `entry` was applied at stream sequence `sequence`, its writes at `time` (`applyTime(of:fallback:)`).
    package func applied(_ entry: ReplicationEntry, data: [UInt8], at sequence: UInt64, time: Int64? = nil) {
        if let time {
            state.activeTime = activeTime(at: time)
            if time > state.applyTime { state.applyTime = time }
        }
        if let counter = entry.publisherSequence, let publisher = entry.publisher.map(String.init) {
            state.publishers[publisher] = PublisherMark(counter: counter, sequence: sequence, time: state.activeTime)
            if state.publishers.count > StreamIntegrity.maximumPublishers { forgetOldestPublisher() }
        }
        if state.knowsChain { state.chain = StreamIntegrity.chained(state.chain, batch: entry.batch, data: data) }
        state.lastBatch = entry.batch
    }

    /// A message at the next sequence that is not applied (a duplicate or a checkpoint): only the position moves.
    package func passed(batch: String) {
        state.lastBatch = batch
    }

    private func forgetOldestPublisher() {
        guard let oldest = state.publishers.min(by: { ($0.value.sequence, $0.key) < ($1.value.sequence, $1.key) }) else { return }
        state.publishers[oldest.key] = nil
        state.publishersComplete = false
    }

    /// SHA-256(previous ‖ batch ‖ 0 ‖ data).
    static func chained(_ previous: [UInt8], batch: String, data: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        guard let context = EVP_MD_CTX_new() else { return digest }
        defer { EVP_MD_CTX_free(context) }
        EVP_DigestInit_ex(context, EVP_sha256(), nil)
        previous.withUnsafeBytes { _ = EVP_DigestUpdate(context, $0.baseAddress, $0.count) }
        var id = Array(batch.utf8)
        id.append(0)
        id.withUnsafeBytes { _ = EVP_DigestUpdate(context, $0.baseAddress, $0.count) }
        data.withUnsafeBytes { _ = EVP_DigestUpdate(context, $0.baseAddress, $0.count) }
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &digest, &length)
        return digest
    }

    // MARK: - Own batches

    /// The publish of this node's `batch` was acknowledged at stream sequence `sequence`; a reason when
    /// the batch was delivered at another.
    func acknowledged(_ batch: String, at sequence: UInt64) -> String? {
        if let delivered = deliveredOwn.removeValue(forKey: batch) {
            return delivered == sequence ? nil : StreamIntegrity.ownMismatch(batch, acknowledged: sequence, delivered: delivered)
        }
        remember(&acknowledgedOwn, batch, sequence)
        return nil
    }

    /// This node's `batch` was delivered (and applied or skipped) at `sequence`; a reason when its publish
    /// was acknowledged at another.
    func deliveredOwnBatch(_ batch: String, at sequence: UInt64) -> String? {
        if let acknowledged = acknowledgedOwn.removeValue(forKey: batch) {
            return acknowledged == sequence ? nil : StreamIntegrity.ownMismatch(batch, acknowledged: acknowledged, delivered: sequence)
        }
        remember(&deliveredOwn, batch, sequence)
        return nil
    }

    /// Keeps at most 64 entries: one side of a pair may never come (a publish whose acknowledgement was
    /// lost and then retried, or a batch trimmed before this node consumed it).
    private func remember(_ table: inout [String: UInt64], _ batch: String, _ sequence: UInt64) {
        if table.count >= 64, let oldest = table.min(by: { $0.value < $1.value }) { table[oldest.key] = nil }
        table[batch] = sequence
    }

    private static func ownMismatch(_ batch: String, acknowledged: UInt64, delivered: UInt64) -> String {
        "this node's batch \(batch) was acknowledged by JetStream at stream sequence \(acknowledged) but delivered to it at \(delivered): the copy of the stream it consumes is numbered differently"
    }

    // MARK: - Checkpoints

    /// After applying stream sequence `sequence`, a checkpoint of this node: remembers its chain there and
    /// returns a reason if claims heard already make this node the minority.
    func recordCheckpoint(at sequence: UInt64, node: String) -> String? {
        guard state.knowsChain else { return nil }
        ownHashes.append((sequence, chainHex))
        if ownHashes.count > StreamIntegrity.rememberedCheckpoints { ownHashes.removeFirst() }
        return verdict(at: sequence, node: node)
    }

    /// A claim by `claimant` (another node) of its chain after `checkpoint.sequence`; a reason when this node
    /// now disagrees with the majority of the claims heard for that sequence (this node's included).
    func claim(_ checkpoint: ReplicationEntry.Checkpoint, from claimant: String, node: String) -> String? {
        guard claimant != node else { return nil }
        // Claimants are nodes: a stream holding claims from ever more names (forged) is not allowed to grow this.
        if let heard = claims[checkpoint.sequence], heard.count >= StreamIntegrity.maximumClaimants, heard[claimant] == nil { return nil }
        claims[checkpoint.sequence, default: [:]][claimant] = checkpoint.hash
        if latestClaims[claimant] != nil || latestClaims.count < StreamIntegrity.maximumClaimants,
           checkpoint.sequence >= latestClaims[claimant]?.sequence ?? 0 {
            latestClaims[claimant] = checkpoint
        }
        if claims.count > StreamIntegrity.rememberedCheckpoints, let oldest = claims.keys.min() { claims[oldest] = nil }
        guard let own = ownHashes.last(where: { $0.sequence == checkpoint.sequence }) else { return nil }
        if own.hash == checkpoint.hash { checkpointsAgreed += 1 } else { checkpointDisagreements += 1 }
        return verdict(at: checkpoint.sequence, node: node)
    }

    /// What another node said at its latest checkpoint, and whether this node's chain there was the same.
    package struct Peer: Equatable {
        package let node: String
        package let sequence: UInt64
        package let hash: String
        package let revision: UInt64?
        /// Nil when this node no longer remembers (or never had) its own chain at that sequence.
        package let agrees: Bool?
    }

    /// Every other node heard from, by name.
    package var peers: [Peer] {
        latestClaims.keys.sorted().map { node in
            let claim = latestClaims[node]!
            let own = ownHashes.last(where: { $0.sequence == claim.sequence })?.hash
            return Peer(node: node, sequence: claim.sequence, hash: claim.hash, revision: claim.revision,
                        agrees: own.map { $0 == claim.hash })
        }
    }

    /// Whether the claims for `sequence`, with this node's own, leave it in a minority.
    private func verdict(at sequence: UInt64, node: String) -> String? {
        guard let own = ownHashes.last(where: { $0.sequence == sequence })?.hash, let heard = claims[sequence] else { return nil }
        var counts: [String: Int] = [own: 1]
        for hash in heard.values { counts[hash, default: 0] += 1 }
        let agreeing = counts[own]!
        guard let (majorityHash, majority) = counts.max(by: { ($0.value, $0.key) < ($1.value, $1.key) }),
              majorityHash != own, majority > agreeing
        else { return nil }
        let others = heard.filter { $0.value == majorityHash }.keys.sorted().joined(separator: ", ")
        return "its running hash after stream sequence \(sequence) is \(own.prefix(12))…, but \(majority) node\(majority == 1 ? "" : "s") (\(others)) have \(majorityHash.prefix(12))…: it applied something else than the majority"
    }

    /// The majority hash claimed for `sequence` (this node's own counted), if any node claimed it.
    func majorityHash(at sequence: UInt64) -> String? {
        var counts: [String: Int] = [:]
        if let own = ownHashes.last(where: { $0.sequence == sequence })?.hash { counts[own] = 1 }
        for hash in claims[sequence]?.values ?? [:].values { counts[hash, default: 0] += 1 }
        return counts.max(by: { ($0.value, $0.key) < ($1.value, $1.key) })?.key
    }

    /// Drops what was heard about the stream (after this node installs a snapshot: its positions changed).
    func reset(to state: State) {
        self.state = state
        ownHashes.removeAll()
        claims.removeAll()
        latestClaims.removeAll()
        acknowledgedOwn.removeAll()
        deliveredOwn.removeAll()
    }

    // MARK: - Encoding

    /// The state as one JSON object: `{"last":"…","chain":"…","publishers":{"n1.x":[counter,sequence,time],…},"complete":true}`
    /// (`time` absent when unknown).
    var json: JSONValue { StreamIntegrity.json(state) }

    static func json(_ state: State) -> JSONValue {
        var publishers: [String: JSONValue] = [:]
        for (name, mark) in state.publishers {
            var members: [JSONValue] = [.int(Int64(bitPattern: mark.counter)), .int(Int64(bitPattern: mark.sequence))]
            if mark.time != 0 { members.append(.int(mark.time)) }
            publishers[name] = .array(members)
        }
        var members: [String: JSONValue] = ["last": .string(state.lastBatch), "chain": .string(hex(state.chain)),
                                            "publishers": .object(publishers), "complete": .bool(state.publishersComplete)]
        if state.applyTime != 0 { members["time"] = .int(state.applyTime) }
        if state.activeTime != 0 { members["active"] = .int(state.activeTime) }
        return .object(members)
    }

    /// The state from `json`; nil when it is not one.
    static func state(from json: JSONValue) -> State? {
        guard case let .string(last)? = json["last"], case let .string(chainText)? = json["chain"],
              let chain = HexText.decode(chainText.utf8), chain.count == 32 || chain.isEmpty,
              case let .object(publisherMembers)? = json["publishers"], case let .bool(complete)? = json["complete"]
        else { return nil }
        var publishers: [String: PublisherMark] = [:]
        for (name, value) in publisherMembers {
            guard case let .array(pair) = value, pair.count == 2 || pair.count == 3, case let .int(counter) = pair[0],
                  case let .int(sequence) = pair[1]
            else { return nil }
            var time: Int64 = 0
            if pair.count == 3 {
                guard case let .int(stated) = pair[2] else { return nil }
                time = stated
            }
            publishers[name] = PublisherMark(counter: UInt64(bitPattern: counter), sequence: UInt64(bitPattern: sequence), time: time)
        }
        var applyTime: Int64 = 0
        if let stated = json["time"] {
            guard case let .int(milliseconds) = stated else { return nil }
            applyTime = milliseconds
        }
        var activeTime: Int64 = 0
        if let stated = json["active"] {
            guard case let .int(milliseconds) = stated else { return nil }
            activeTime = milliseconds
        }
        return State(lastBatch: last, chain: chain, publishers: publishers, publishersComplete: complete, applyTime: applyTime,
                     activeTime: activeTime)
    }

    /// The state as stored (compact JSON bytes).
    package var encodedState: [UInt8] {
        var bytes: [UInt8] = []
        JSONWriter.write(json, into: &bytes)
        return bytes
    }

    /// A stored state; nil when `bytes` is not one.
    static func decodeState(_ bytes: [UInt8]) -> State? {
        guard let value = try? JSONParser.parse(bytes) else { return nil }
        return state(from: value)
    }

    static func hex(_ bytes: [UInt8]) -> String { HexText.encode(bytes) }
}
