import KVOEngine
import KVOModel

/// Puts snapshots back together from the snapshot stream's messages, read in any order, and picks the
/// newest one that is whole and sound: every chunk present, consistent headers, the announced length and
/// SHA-256, a body that decodes, of a known engine version, covering the sequence its chunks name.
///
/// Anything else (a message that is not a chunk, a missing chunk, a wrong hash, a foreign or corrupt
/// body) is never returned; what was passed over is listed in `problems` for the log. Repeated chunks
/// (the same chunk published by two nodes after JetStream's de-duplication window) count once. A value;
/// any thread (the snapshot reader's).
struct SnapshotAssembler {
    private var chunks: [SnapshotChunk.Key: [Int: SnapshotChunk]] = [:]
    /// What was passed over and why, in words.
    private(set) var problems: [String] = []

    /// Adds stream message `message` (stream sequence `streamSequence`, for the problems' wording).
    mutating func add(_ message: [UInt8], streamSequence: UInt64) {
        do throws(ClusterSnapshotError) {
            add(try SnapshotChunk.decode(message))
        } catch {
            problems.append("snapshot stream message \(streamSequence) skipped: \(error)")
        }
    }

    mutating func add(_ chunk: SnapshotChunk) {
        chunks[chunk.key, default: [:]][chunk.index] = chunk
    }

    /// The newest whole and sound snapshot (highest sequence), or nil. Snapshots found unsound on the way
    /// are described in `problems`.
    mutating func newest() -> ClusterSnapshot? {
        for key in chunks.keys.sorted(by: { ($0.sequence, $0.sha256) > ($1.sequence, $1.sha256) }) {
            do throws(ClusterSnapshotError) {
                return try assemble(key)
            } catch {
                problems.append("snapshot of stream sequence \(key.sequence) passed over: \(error)")
            }
        }
        return nil
    }

    /// The snapshot `key`'s chunks put together, checked and decoded.
    func assemble(_ key: SnapshotChunk.Key) throws(ClusterSnapshotError) -> ClusterSnapshot {
        guard let pieces = chunks[key], let first = pieces.values.first else { throw .malformed("no chunk") }
        let count = first.count
        guard pieces.values.allSatisfy({ $0.count == count && $0.totalBytes == first.totalBytes
            && $0.revision == first.revision && $0.version == first.version })
        else { throw .malformed("its chunks disagree on the count, length, revision or version") }
        let missing = (0..<count).filter { pieces[$0] == nil }
        guard missing.isEmpty else {
            throw .malformed("chunk\(missing.count == 1 ? "" : "s") \(missing.prefix(5).map(String.init).joined(separator: ", ")) of \(count) missing")
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(first.totalBytes)
        for index in 0..<count { bytes.append(contentsOf: pieces[index]!.data) }
        let hash = SHA256Hex.of(bytes)
        guard bytes.count == first.totalBytes, hash == key.sha256 else {
            throw .hashMismatch(expected: "\(key.sha256) (\(first.totalBytes) bytes)", found: "\(hash) (\(bytes.count) bytes)")
        }
        let snapshot = try ClusterSnapshot.decode(bytes)
        guard snapshot.sequence == key.sequence, snapshot.revision == first.revision, snapshot.version == first.version else {
            throw .malformed("the body covers sequence \(snapshot.sequence) (revision \(snapshot.revision)), its chunks say \(key.sequence) (revision \(first.revision))")
        }
        return snapshot
    }
}
