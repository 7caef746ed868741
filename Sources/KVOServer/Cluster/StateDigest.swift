import COpenSSL
import KVOEngine
import KVOJSON

/// A SHA-256 digest of everything the engine stores that replication must make equal on every node:
/// the revision, every object (sorted by id, as compact JSON with sorted keys, and the revision of its last
/// change), every class
/// definition (sorted by name), every binding (by id, with the last binding id given) and every user
/// (sorted by name, with hash, rules and tokens), and in a cluster every presence session. Two nodes that applied the same stream have the same digest; the
/// tests compare nodes with it (the `digest` operation). Loop thread (it reads the engine).
enum StateDigest {
    /// The digest as 64 lowercase hex digits. O(everything stored): an admin and test tool, not a hot path.
    static func of(_ engine: KVOEngine, users: UserDirectory? = nil, sessions: [JSONValue] = []) -> String {
        guard let context = EVP_MD_CTX_new() else { return "" }
        defer { EVP_MD_CTX_free(context) }
        EVP_DigestInit_ex(context, EVP_sha256(), nil)
        var buffer: [UInt8] = []
        func feed(_ bytes: [UInt8]) {
            bytes.withUnsafeBytes { _ = EVP_DigestUpdate(context, $0.baseAddress, $0.count) }
        }
        feed(Array("rev \(engine.revision)\n".utf8))
        for id in engine.objects.keys.sorted() {
            buffer.removeAll(keepingCapacity: true)
            JSONWriter.writeString(id, into: &buffer)
            buffer.append(0x20)
            JSONWriter.write(engine.objects[id]!, into: &buffer)
            // Its last-change revision: what `ifRev` compares, so nodes must agree on it too.
            buffer.append(0x20)
            JSONWriter.writeInteger(Int64(bitPattern: engine.changedRevision(of: id) ?? 0), into: &buffer)
            buffer.append(0x0A)
            feed(buffer)
        }
        /// One line: `label`, a space, `value` as compact JSON.
        func feedLine(_ label: String, _ value: JSONValue) {
            buffer.removeAll(keepingCapacity: true)
            buffer.append(contentsOf: Array(label.utf8))
            buffer.append(0x20)
            JSONWriter.write(value, into: &buffer)
            buffer.append(0x0A)
            feed(buffer)
        }
        for definition in engine.classDefinitions() { feedLine("class", definition) }
        // Bindings are replicated state: their definitions (with ids and creators) and the last id given.
        if engine.lastBindingID > 0 { feed(Array("binding ids \(engine.lastBindingID)\n".utf8)) }
        for listing in engine.bindingListings() { feedLine("binding", listing) }
        // Users are replicated state in a cluster: names, hashes, rules and tokens.
        for user in users?.users ?? [] { feedLine("user", user.json) }
        // Expiries are replicated state: each deadline was computed from a replicated write time.
        let expiries = engine.expiryEntries
        for id in expiries.keys.sorted() {
            feedLine("expiry", .array([.string(id), .int(expiries[id]!.ttl), .int(expiries[id]!.deadline)]))
        }
        // Presence sessions are replicated state in a cluster (`[id, record]`, by id): holders, attachments, actions.
        for session in sessions { feedLine("session", session) }
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &digest, &length)
        return HexText.encode(digest.prefix(Int(length)))
    }
}
