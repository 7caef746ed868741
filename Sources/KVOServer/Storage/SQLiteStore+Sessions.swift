import KVOJSON
import KVOModel

/// The sessions table (schema 8): each session's record (`PresenceSession.record`) by id, written with the
/// group commit (`CommitBatch.sessions`) and read back once at start-up. In cluster mode it holds the replicated
/// table, and `replaceAll` replaces it by an installed snapshot's. Loop thread, like the rest of the store.
extension SQLiteStore {
    /// Every stored session, detached. A row that is not a session's record is `.corrupt`, naming it.
    func loadSessions() throws(StorageError) -> [PresenceSession] {
        guard let database else { throw .closed }
        let query = try database.prepare("SELECT id, record FROM sessions ORDER BY id")
        defer { query.finalize() }
        var sessions: [PresenceSession] = []
        while try query.step() {
            let id = query.string(0)
            let row = "session '\(PrintableText.escaped(id, limit: 64))'"
            guard query.isText(1) else { throw .corrupt(row: row, reason: "the record is not text") }
            let value: JSONValue
            do { value = try JSONParser.parse(query.textBytes(1)) } catch {
                throw .corrupt(row: row, reason: "invalid JSON: \(error)")
            }
            guard let session = PresenceSession(id: id, record: value) else {
                throw .corrupt(row: row, reason: "not a session's record (grace, next, actions, ephemeral)")
            }
            sessions.append(session)
        }
        return sessions
    }
}
