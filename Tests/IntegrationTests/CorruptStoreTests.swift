import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Issue 10 item 2: every value kvod reads from its SQLite file is range-checked. A damaged row makes
/// kvod refuse to start with one message naming the file (issue 27), the row and the problem (exit status 1, never a Swift
/// runtime trap), and an existing database that lacks a table never starts as an empty store.
@Suite("corrupt store over TCP")
struct CorruptStoreTests {
    /// One damage done to a healthy database, and what kvod's refusal must say.
    struct Damage: Sendable, CustomTestStringConvertible {
        let name: String
        let sql: String
        let expected: [String]
        var testDescription: String { name }
    }

    static let maximumCounter: Int64 = 1 << 62

    static let damages: [Damage] = [
        Damage(name: "meta.revision 2^63-1", sql: "UPDATE meta SET value = 9223372036854775807 WHERE key = 'revision'",
               expected: ["meta revision", "9223372036854775807", "from 0 to \(maximumCounter)"]),
        Damage(name: "meta.revision 2^62+1", sql: "UPDATE meta SET value = \(maximumCounter + 1) WHERE key = 'revision'",
               expected: ["meta revision"]),
        Damage(name: "meta.revision -1", sql: "UPDATE meta SET value = -1 WHERE key = 'revision'",
               expected: ["meta revision", "'-1'"]),
        Damage(name: "meta.revision text", sql: "UPDATE meta SET value = 'seven' WHERE key = 'revision'",
               expected: ["meta revision", "'seven'"]),
        Damage(name: "meta.last_binding_id 2^63-1",
               sql: "UPDATE meta SET value = 9223372036854775807 WHERE key = 'last_binding_id'",
               expected: ["meta last_binding_id", "9223372036854775807"]),
        Damage(name: "meta.last_binding_id -3", sql: "UPDATE meta SET value = -3 WHERE key = 'last_binding_id'",
               expected: ["meta last_binding_id"]),
        Damage(name: "meta.schema_version missing", sql: "DELETE FROM meta WHERE key = 'schema_version'",
               expected: ["meta schema_version", "missing"]),
        Damage(name: "meta.schema_version 0", sql: "UPDATE meta SET value = 0 WHERE key = 'schema_version'",
               expected: ["meta schema_version"]),
        Damage(name: "history.bytes 2^63-1",
               sql: "UPDATE history SET bytes = 9223372036854775807 WHERE rev = (SELECT max(rev) FROM history)",
               expected: ["history rev", "bytes '9223372036854775807'"]),
        Damage(name: "history.bytes -1", sql: "UPDATE history SET bytes = -1 WHERE rev = 1",
               expected: ["history rev 1", "bytes '-1'"]),
        Damage(name: "history.rev past meta.revision", sql: "UPDATE history SET rev = 1000 WHERE rev = (SELECT max(rev) FROM history)",
               expected: ["history rev 1000"]),
        Damage(name: "history.rev negative", sql: "UPDATE history SET rev = -4 WHERE rev = 1",
               expected: ["history rev -4"]),
        Damage(name: "history.object not text", sql: "UPDATE history SET object = x'00ff' WHERE rev = 1",
               expected: ["history rev 1", "not text"]),
        Damage(name: "binding id negative", sql: "UPDATE bindings SET id = -5",
               expected: ["binding -5", "from 1 to \(maximumCounter)"]),
        Damage(name: "binding id 2^63-1", sql: "UPDATE bindings SET id = 9223372036854775807",
               expected: ["binding 9223372036854775807"]),
        Damage(name: "object id not text", sql: "UPDATE objects SET id = x'6162' WHERE id = 'a'",
               expected: ["object 'ab'", "not text"]),
        Damage(name: "object value not JSON", sql: "UPDATE objects SET value = '{\"x\":' WHERE id = 'a'",
               expected: ["object 'a'", "invalid JSON"]),
        Damage(name: "class definition not JSON", sql: "UPDATE classes SET definition = '[1'",
               expected: ["class 'Thing'", "invalid JSON"]),
        Damage(name: "objects table dropped", sql: "DROP TABLE objects", expected: ["no 'objects' table"]),
        Damage(name: "history table dropped", sql: "DROP TABLE history", expected: ["no 'history' table"]),
        Damage(name: "bindings table dropped", sql: "DROP TABLE bindings", expected: ["no 'bindings' table"]),
        Damage(name: "meta table dropped", sql: "DROP TABLE meta", expected: ["no 'meta' table"]),
        Damage(name: "redo table dropped", sql: "DROP TABLE redo", expected: ["no 'redo' table"]),
        Damage(name: "users table dropped", sql: "DROP TABLE users", expected: ["no 'users' table"]),
        Damage(name: "a user row that is not a user", sql: "INSERT INTO users(name, record) VALUES('eve', '{\"name\":\"eve\"}')",
               expected: ["user 'eve'", "passwordHash"]),
        Damage(name: "redo.rev 2^63-1", sql: "UPDATE redo SET rev = 9223372036854775807",
               expected: ["redo 'big' rev 9223372036854775807", "stored revision"]),
        Damage(name: "redo.rev negative", sql: "UPDATE redo SET rev = -2", expected: ["redo 'big' rev -2"]),
        Damage(name: "redo row of a missing object", sql: "UPDATE redo SET object = 'nowhere'",
               expected: ["redo 'nowhere'", "no snapshot"]),
        Damage(name: "redo change not JSON", sql: "UPDATE redo SET change = '{\"set\":'", expected: ["redo 'big'", "invalid JSON"]),
        Damage(name: "redo change creates", sql: "UPDATE redo SET change = '{\"created\":{}}'",
               expected: ["redo 'big'", "cannot create or delete"]),
    ]

    /// A data directory with objects, history, a class and a binding, written by a real kvod and closed.
    static func healthyStore(_ directory: TemporaryDirectory) throws -> (data: String, database: String) {
        let data = directory.appending("data")
        let server = try KVODProcess(dataDirectory: data)
        let client = try server.connect()
        try client.call("defineClass", ["class": ["name": "Thing", "properties": ["n": ["type": "integer"]]]])
        try client.call("create", ["object": "a", "values": ["v": 1]])
        try client.call("create", ["object": "b", "values": ["w": 0]])
        try client.call("create", ["object": "c", "class": "Thing", "values": ["n": 2]])
        try client.call("bind", ["from": ["object": "a", "keyPath": "v"], "to": ["object": "b", "keyPath": "w"]])
        try client.call("set", ["object": "a", "keyPath": "v", "value": 2])
        // A large object's small write is stored as a redo row.
        try client.call("create", ["object": "big", "values": ["pad": .string(String(repeating: "p", count: 4000)), "n": 0]])
        try client.call("set", ["object": "big", "keyPath": "n", "value": 1])
        expectEqual(server.stop(), 0)
        return (data, (data as NSString).appendingPathComponent("kvod.sqlite3"))
    }

    @Test("a damaged value refuses the start with one message naming the row, never a trap", arguments: damages)
    func damagedValueRefusesStart(damage: Damage) throws {
        let directory = try TemporaryDirectory("corrupt")
        let store = try Self.healthyStore(directory)
        try SQLiteFile.execute(damage.sql, at: store.database)
        do {
            let server = try KVODProcess(dataDirectory: store.data)
            let objects = (try? server.connect().call("list")["objects"]) ?? .null
            server.stop()
            Issue.record("kvod started over a damaged store (\(damage.name)); objects: \(objects)")
        } catch let KVODProcessError.exitedEarly(status, log) {
            expectEqual(status, 1, "exit status \(status): \(log)")
            #expect(!log.contains("Fatal error"), "\(log)")
            #expect(log.contains("cannot start: storage:"), "\(log)")
            #expect(log.contains("'\(store.database)'"), "the refusal names the file: \(log)")
            for text in damage.expected {
                #expect(log.contains(text), "missing '\(text)' in: \(log)")
            }
        }
    }

    @Test("counters near the largest stored value start; the next write, bind and bindings work up to it, then too_large")
    func countersAtTheMaximumKeepWorking() throws {
        let directory = try TemporaryDirectory("corrupt-edge")
        let store = try Self.healthyStore(directory)
        let maximum = Self.maximumCounter
        try SQLiteFile.execute("UPDATE meta SET value = \(maximum - 1) WHERE key IN ('revision', 'last_binding_id')",
                               at: store.database)
        let server = try KVODProcess(dataDirectory: store.data)
        let client = try server.connect()
        expectEqual(try client.call("set", ["object": "b", "keyPath": "w", "value": 9])["rev"], .int(maximum))
        expectError(try client.request("set", ["object": "b", "keyPath": "w", "value": 10]), code: "too_large")
        let binding = try client.call("bind", ["from": ["object": "c", "keyPath": "n"], "to": ["object": "b", "keyPath": "x"]])
        expectEqual(binding["binding"], .int(maximum))
        expectError(try client.request("bind", ["from": ["object": "c", "keyPath": "n"], "to": ["object": "b", "keyPath": "y"]]),
                    code: "too_large")
        let listed = try client.call("bindings")["bindings"]?.arrayValue ?? []
        #expect(listed.contains { $0["binding"] == .int(maximum) }, "\(listed)")
        let restarted = try server.restart()
        let again = try restarted.connect()
        expectEqual(try again.call("get", ["object": "b"])["rev"], .int(maximum))
        expectEqual(try again.call("get", ["object": "b", "keyPath": "w"])["value"], 9)
        expectEqual(try again.call("bindings")["bindings"]?.arrayValue, listed)
    }

    @Test("only a brand-new file is initialised: a database file without tables starts empty")
    func emptyFileStartsEmpty() throws {
        let directory = try TemporaryDirectory("corrupt-new")
        let data = directory.appending("data")
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: (data as NSString).appendingPathComponent("kvod.sqlite3"), contents: Data())
        let server = try KVODProcess(dataDirectory: data)
        expectEqual(try server.connect().call("list")["objects"], [])
    }
}
