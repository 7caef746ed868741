import ArgumentParser
import KVOCommandLine
import KVOJSON
import KVOServer
#if canImport(Glibc)
import Glibc
#endif

/// Where the users live: the store under `--data DIR` (kvod's default data directory when neither
/// flag is given), or `--users FILE` (for `kvod --in-memory --users FILE`).
struct UserSource: ParsableArguments {
    @Option(help: ArgumentHelp("Data directory of a stopped kvod (default: \(KVOD.defaultDataDirectory)).", valueName: "directory"))
    var data: String?

    @Option(help: ArgumentHelp("The users file of `kvod --in-memory --users FILE` instead (created if missing).", valueName: "file"))
    var users: String?

    @Flag(name: .customLong("init"), help: """
        Start a new, empty store where the data directory held a database that is now missing or empty (as \
        `kvod --init`; without it the command refuses).
        """)
    var replacesLostDatabase = false

    func validate() throws {
        if let data, let users {
            throw ValidationError("--data '\(data)' and --users '\(users)' cannot be used together")
        }
        if replacesLostDatabase, let users {
            throw ValidationError("--init goes with --data, not --users '\(users)'")
        }
    }

    /// Reads the users, lets `change` alter them, and writes back what changed when it returns true.
    /// With `--data`, the store is opened as kvod opens it (locked for this process); with `--users`,
    /// the file's lock is taken exclusive (`UsersFileLock`): with a kvod running on the same directory
    /// or serving the same file this fails, saying so, and changes nothing (the kvod would later
    /// overwrite the file with its own users).
    func update(_ change: (UserDirectory) throws -> Bool) throws {
        if let path = users {
            guard let lock = try UsersFileLock(usersFile: path, mode: .editing) else {
                throw UserCommandError("""
                    the users file '\(path)' is in use by a running kvod: stop it first, or change users \
                    online with `kvoclient user …`
                    """)
            }
            defer { lock.release() }
            let directory = try UsersFile.load(path, missingIsEmpty: true)
            if try change(directory) { try UsersFile.save(directory, to: path) }
            return
        }
        let store = try openStore()
        defer { store.close() }
        let directory = try store.loadUsers()
        let before = directory.users
        guard try change(directory) else { return }
        let after = directory.users
        let remaining = Set(after.map(\.name))
        try store.writeUsers(upserting: after.filter { !before.contains($0) },
                             deleting: before.map(\.name).filter { !remaining.contains($0) })
    }

    func read() throws -> UserDirectory {
        if let path = users { return try UsersFile.load(path, missingIsEmpty: true) }
        let store = try openStore()
        defer { store.close() }
        return try store.loadUsers()
    }

    /// The store, synced fully (user changes are rare), with no history trimming (the limits are the
    /// server's business).
    private func openStore() throws -> SQLiteStore {
        let directory = data ?? KVOD.defaultDataDirectory
        do {
            let store = try SQLiteStore(directory: directory, sync: .full, historyLimit: .max, historyByteLimit: .max,
                                        replacesLostDatabase: replacesLostDatabase)
            // Store files that were open to others and have been made private: said, as kvod says it.
            for note in store.openingNotes { FileHandleStandardError.write("warning: \(note)\n") }
            return store
        } catch .locked {
            throw UserCommandError("""
                the data directory '\(directory)' is in use by a running kvod: stop it first, or change users \
                online with `kvoclient user …`
                """)
        } catch {
            throw UserCommandError("\(error)")
        }
    }
}
