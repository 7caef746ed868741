import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// `kvoclient subscribe --pattern` (the real CLI against the real kvod): the id set's lines, a key path on
/// present and future objects, `--json`, live queries (`--where`), and a malformed pattern or filter refused
/// before anything is printed.
@Suite("kvoclient subscribe --pattern")
struct CLIPatternSubscribeTests {
    @Test func idSetAndKeyPathLines() throws {
        let server = try KVODProcess()
        let writer = try server.connect()
        try writer.call("create", ["object": "user:1", "values": ["address": ["city": "London"]]])
        let ids = try KVOClientProcess.start(server, ["subscribe", "--pattern", "user:*", "--options", "initial", "--count", "3"])
        let cities = try KVOClientProcess.start(server, ["subscribe", "--pattern", "user:*", "address.city",
                                                         "--options", "initial,new,old", "--count", "4"])
        let json = try KVOClientProcess.start(server, ["subscribe", "--pattern", "user:*", "--json", "--count", "1"])
        _ = try waitForObservers(writer, object: "user:1", count: 3)
        try writer.call("create", ["object": "order:1", "values": [:]])
        try writer.call("create", ["object": "user:2", "values": ["address": ["city": "Oslo"]]])
        try writer.call("set", ["object": "user:1", "keyPath": "address.city", "value": "Paris"])
        try writer.call("delete", ["object": "user:1"])
        let idLines = ids.finish()
        expectEqual(idLines.status, 0, "\(idLines.stderr)")
        #expect(idLines.stdout.split(separator: "\n") == [
            #"user:*  initial  rev=1  new=["user:1"]"#, "user:2  created  rev=3", "user:1  sourceDeleted  rev=5",
        ])
        let cityLines = cities.finish()
        expectEqual(cityLines.status, 0, "\(cityLines.stderr)")
        #expect(cityLines.stdout.split(separator: "\n") == [
            #"user:1.address.city  initial  rev=1  new="London""#,
            #"user:2.address.city  created  rev=3  old=null  new="Oslo""#,
            #"user:1.address.city  valueChanged  rev=4  old="London"  new="Paris""#,
            #"user:1.address.city  sourceDeleted  rev=5  old="Paris"  new=null"#,
        ])
        let jsonLines = json.finish()
        expectEqual(jsonLines.status, 0, "\(jsonLines.stderr)")
        let event = try JSONParser.parse(Array(jsonLines.stdout.utf8.prefix { $0 != 0x0A }))
        expectEqual(event["object"], "user:2")
        expectEqual(event["reason"], "created")
        expectEqual(event["keyPath"], nil)
    }

    @Test func malformedPatternIsRefused() throws {
        let server = try KVODProcess()
        let result = try KVOClientProcess.run(server, ["subscribe", "--pattern", ""])
        #expect(result.status != 0)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.contains("'pattern' must not be empty"), "\(result.stderr)")
        let missing = try KVOClientProcess.run(server, ["subscribe"])
        #expect(missing.status != 0)
        #expect(missing.stderr.contains("<object>"), "\(missing.stderr)")
    }

    @Test func liveQueryLines() throws {
        let server = try KVODProcess()
        let writer = try server.connect()
        try writer.call("create", ["object": "order:1", "values": ["status": "open", "total": 150]])
        let ids = try KVOClientProcess.start(server, ["subscribe", "--pattern", "order:*", "--where", "status == 'open'",
                                                      "--options", "initial", "--count", "3"])
        let totals = try KVOClientProcess.start(server, ["subscribe", "--pattern", "order:*", "total", "--where",
                                                         "status == 'open'", "--options", "new,old", "--count", "2"])
        _ = try waitForObservers(writer, object: "order:1", count: 2)
        try writer.call("create", ["object": "order:2", "values": ["status": "open", "total": 120]])
        try writer.call("set", ["object": "order:1", "keyPath": "status", "value": "closed"])
        let idLines = ids.finish()
        expectEqual(idLines.status, 0, "\(idLines.stderr)")
        #expect(idLines.stdout.split(separator: "\n") == [
            #"order:*  initial  rev=1  new=["order:1"]"#, "order:2  entered  rev=2", "order:1  left  rev=3",
        ])
        let totalLines = totals.finish()
        expectEqual(totalLines.status, 0, "\(totalLines.stderr)")
        #expect(totalLines.stdout.split(separator: "\n") == [
            "order:2.total  entered  rev=2  old=null  new=120", "order:1.total  left  rev=3  old=150  new=null",
        ])
    }

    @Test func malformedFilterIsRefused() throws {
        let server = try KVODProcess()
        let result = try KVOClientProcess.run(server, ["subscribe", "--pattern", "x:*", "--where", "a =="])
        #expect(result.status != 0)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.contains("'where'"), "\(result.stderr)")
        let withoutPattern = try KVOClientProcess.run(server, ["subscribe", "x", "a", "--where", "a"])
        #expect(withoutPattern.status != 0)
        #expect(withoutPattern.stderr.contains("--where goes with --pattern"), "\(withoutPattern.stderr)")
    }
}
