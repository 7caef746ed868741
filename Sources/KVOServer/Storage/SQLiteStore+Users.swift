import KVOJSON
import KVOEngine
import KVOModel

/// The users' rows (`users(name, record)`, schema version 4). Users change rarely (the `kvod user`
/// commands, the admin operations), so each change is its own small transaction, written at once,
/// outside the group commit of object writes (which never leaves a transaction open between loop
/// iterations). Loop thread only, like the rest of the store.
extension SQLiteStore {
    /// Every stored user. A row that does not decode throws `.corrupt` naming it (`user 'alice'`).
    package func loadUsers() throws(StorageError) -> UserDirectory {
        guard let database else { throw .closed }
        let query = try database.prepare("SELECT name, record FROM users ORDER BY name")
        defer { query.finalize() }
        let directory = UserDirectory()
        while try query.step() {
            let name = query.string(0)
            let row = "user '\(PrintableText.escaped(name, limit: 64))'"
            guard query.isText(1) else { throw .corrupt(row: row, reason: "the record is not text") }
            let value: JSONValue
            do { value = try JSONParser.parse(query.textBytes(1)) } catch {
                throw .corrupt(row: row, reason: "invalid JSON: \(error)")
            }
            do throws(UserDirectoryError) {
                let user = try UserRecord(json: value)
                guard user.name == name else { throw UserDirectoryError("the record names '\(user.name)'") }
                try directory.add(user)
            } catch {
                throw .corrupt(row: row, reason: error.message)
            }
        }
        return directory
    }

    /// Stores `upserting` (inserted or replaced by name) and deletes `deleting`, in one transaction,
    /// synced as the store's `--sync` says.
    package func writeUsers(upserting: [UserRecord], deleting: [String] = []) throws(StorageError) {
        guard let database else { throw .closed }
        try database.exec("BEGIN IMMEDIATE")
        do throws(StorageError) {
            try writeUserRows(upserting: upserting, deleting: deleting)
            try database.exec("COMMIT")
        } catch {
            if database.isInTransaction { try? database.exec("ROLLBACK") }
            throw error
        }
    }

    /// The rows of `writeUsers`, inside the caller's transaction (`writeUsers`, or `commit` for a cluster
    /// node's batch).
    func writeUserRows(upserting: [UserRecord], deleting: [String]) throws(StorageError) {
        guard let database else { throw .closed }
        let upsert = try database.prepare(
            "INSERT INTO users(name, record) VALUES(?1, ?2) ON CONFLICT(name) DO UPDATE SET record = excluded.record")
        defer { upsert.finalize() }
        for user in upserting {
            try upsert.bind(1, text: user.name)
            try upsert.bind(2, text: JSONWriter.string(user.json))
            try upsert.run()
            upsert.reset()
        }
        let delete = try database.prepare("DELETE FROM users WHERE name = ?1")
        defer { delete.finalize() }
        for name in deleting {
            try delete.bind(1, text: name)
            try delete.run()
            delete.reset()
        }
    }
}
