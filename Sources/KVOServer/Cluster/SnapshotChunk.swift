import KVOJSON
import KVOEngine
import KVOModel

/// One message of the snapshot stream: a piece of an encoded `ClusterSnapshot`, with what a reader needs
/// to put the pieces together and check them: the stream sequence and revision the snapshot covers, its
/// engine version, the chunk's index and the number of chunks, the whole snapshot's length and SHA-256.
///
/// A message is one line of compact JSON (the header), a newline, then the chunk's bytes:
/// `{"count":3,"index":0,"bytes":1200000,"rev":812,"seq":600,"sha256":"9f…","v":2}\n<bytes>`. Its JetStream
/// message id is `"<seq>.<sha256>.<index>"`: every node snapshots the same sequence to the same bytes, so
/// a second node's copy of a chunk is dropped by JetStream's de-duplication. A value; any thread.
struct SnapshotChunk: Sendable, Equatable {
    /// Chunks carry at most this many bytes of the snapshot (NATS's default message limit is 1 MiB).
    static let maximumBytes = 512 * 1024

    var sequence: UInt64
    var revision: UInt64
    var version: Int64
    var index: Int
    var count: Int
    var totalBytes: Int
    var sha256: String
    var data: ArraySlice<UInt8>

    /// Which snapshot the chunk belongs to: chunks with equal keys are pieces of one snapshot.
    struct Key: Hashable, Sendable {
        var sequence: UInt64
        var sha256: String
    }

    var key: Key { Key(sequence: sequence, sha256: sha256) }

    /// The JetStream message id (de-duplication across nodes and retries).
    var messageID: String { "\(sequence).\(sha256).\(index)" }

    /// Cuts an encoded snapshot into chunks of at most `maximumBytes` (one, empty, for empty bytes).
    static func split(_ bytes: [UInt8], of snapshot: ClusterSnapshot, maximumBytes: Int = SnapshotChunk.maximumBytes) -> [SnapshotChunk] {
        let hash = SHA256Hex.of(bytes)
        let count = max(1, (bytes.count + maximumBytes - 1) / maximumBytes)
        return (0..<count).map { index in
            let start = index * maximumBytes
            let end = min(bytes.count, start + maximumBytes)
            return SnapshotChunk(sequence: snapshot.sequence, revision: snapshot.revision, version: snapshot.version,
                                 index: index, count: count, totalBytes: bytes.count, sha256: hash,
                                 data: bytes[start..<end])
        }
    }

    func encoded() -> [UInt8] {
        let header = JSONValue.object([
            "seq": .int(Int64(bitPattern: sequence)), "rev": .int(Int64(bitPattern: revision)), "v": .int(version),
            "index": .int(Int64(index)), "count": .int(Int64(count)), "bytes": .int(Int64(totalBytes)),
            "sha256": .string(sha256),
        ])
        var bytes: [UInt8] = []
        bytes.reserveCapacity(data.count + 160)
        JSONWriter.write(header, into: &bytes)
        bytes.append(0x0A)
        bytes.append(contentsOf: data)
        return bytes
    }

    /// Decodes a snapshot stream message; anything that is not a well-formed chunk throws.
    static func decode(_ message: [UInt8]) throws(ClusterSnapshotError) -> SnapshotChunk {
        guard let newline = message.firstIndex(of: 0x0A) else { throw .malformed("a chunk without a header line") }
        let header: JSONValue
        do {
            header = try JSONParser.parse(Array(message[..<newline]))
        } catch {
            throw .malformed("a chunk's header is not JSON: \(error)")
        }
        guard case let .int(sequence)? = header["seq"], sequence >= 1, case let .int(revision)? = header["rev"], revision >= 0,
              case let .int(version)? = header["v"], case let .int(index)? = header["index"],
              case let .int(count)? = header["count"], case let .int(total)? = header["bytes"],
              case let .string(hash)? = header["sha256"]
        else { throw .malformed("a chunk's header lacks 'seq', 'rev', 'v', 'index', 'count', 'bytes' or 'sha256'") }
        guard count >= 1, count <= 1_000_000, index >= 0, index < count, total >= 0,
              hash.utf8.count == 64, hash.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        else { throw .malformed("a chunk's header is out of range (index \(index) of \(count), \(total) bytes)") }
        return SnapshotChunk(sequence: UInt64(sequence), revision: UInt64(revision), version: version, index: Int(index),
                             count: Int(count), totalBytes: Int(total), sha256: hash, data: message[(newline + 1)...])
    }
}
