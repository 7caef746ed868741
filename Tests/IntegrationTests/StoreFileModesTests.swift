import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// The store holds the users' Argon2id and token hashes: against the real kvod started under umask 022,
/// the data directory it creates is 0700 and its files (the database, its -wal and -shm, the lock) 0600;
/// files of an existing store that others may read are made 0600 with a warning; the users file kvod
/// writes is 0600.
@Suite("store file modes")
struct StoreFileModesTests {
    private func mode(_ path: String) -> Int? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Int(info.st_mode & 0o777)
    }

    private func octal(_ mode: Int?) -> String { mode.map { "0" + String($0, radix: 8) } ?? "missing" }

    @Test("under umask 022 a new data directory is 0700 and the store's files 0600; looser ones are tightened")
    func privateDataDirectory() throws {
        let scratch = try TemporaryDirectory("modes")
        let data = scratch.appending("new/data")
        let server = try KVODProcess(storage: .directory(data), shellPrefix: "umask 022")
        let client = try server.connect()
        try client.call("create", ["object": "o", "values": ["v": 1]])
        let database = data + "/kvod.sqlite3"
        // While kvod runs the WAL and its index exist.
        expectEqual(mode(data), 0o700, "\(octal(mode(data)))")
        for path in [database, database + "-wal", database + "-shm", database + ".lock"] {
            expectEqual(mode(path), 0o600, "\(path): \(octal(mode(path)))")
        }
        expectEqual(server.stop(), 0)
        // Parents kvod created follow the umask as before.
        expectEqual(mode(scratch.appending("new")), 0o755)

        // An existing store whose database others may read (an older kvod made it 0644): made 0600, said so.
        expectEqual(chmod(database, 0o644), 0)
        let again = try KVODProcess(storage: .directory(data), shellPrefix: "umask 022")
        #expect(again.waitForLog("kvod.sqlite3' was mode 0644"), "\(again.log)")
        expectEqual(mode(database), 0o600, "\(octal(mode(database)))")
        expectEqual(try again.connect().call("get", ["object": "o"])["value"], ["v": 1])
        expectEqual(again.stop(), 0)

        // `kvod user … --data` opens the store as kvod does, and says so too.
        expectEqual(chmod(database, 0o640), 0)
        let listed = try KVODUserTool.run(["list", "--data", data])
        expectEqual(listed.status, 0, "\(listed.stderr)")
        #expect(listed.stderr.contains("kvod.sqlite3' was mode 0640"), "\(listed.stderr)")
        expectEqual(mode(database), 0o600, "\(octal(mode(database)))")
    }

    @Test("the users file kvod writes online is 0600 under umask 022")
    func privateUsersFile() throws {
        let scratch = try TemporaryDirectory("modes")
        let usersFile = scratch.appending("users.json")
        try KVODUserTool.addUser("alice", password: "pw", usersFile: usersFile)
        expectEqual(chmod(usersFile, 0o644), 0)
        let server = try KVODProcess(["--users", usersFile], shellPrefix: "umask 022")
        let admin = try server.connect()
        try admin.call("auth", ["user": "alice", "password": "pw"])
        try admin.call("userAdd", ["user": "bob", "password": "pw", "hashCost": "minimal"])
        expectEqual(mode(usersFile), 0o600, "\(octal(mode(usersFile)))")
        expectEqual(mode(usersFile + ".lock"), 0o600, "\(octal(mode(usersFile + ".lock")))")
        expectEqual(server.stop(), 0)
    }
}
