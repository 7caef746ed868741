import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Signals against the real kvod over TCP (docs/protocol.md, "Signals"): a payload to the observers of an object
/// (of any key path of it, and pattern observers whose set holds it), encoded once, with no revision and nothing
/// stored; `write` to send, `read` to hear; hostile payloads, floods and unknown objects refused with nothing sent.
@Suite struct SignalsOverTCPTests {
    /// The change events that arrive on `connection` within `timeout` seconds.
    private func events(_ connection: KVOConnection, within timeout: Double) throws -> [JSONValue] {
        let deadline = Date().addingTimeInterval(timeout)
        var events: [JSONValue] = []
        while Date() < deadline, let event = try connection.nextEvent(timeout: max(0.05, deadline.timeIntervalSinceNow)) {
            events.append(event)
        }
        return events
    }

    /// The next event's raw line (no request in flight on `connection`).
    private func nextLine(_ connection: KVOConnection) throws -> String {
        String(decoding: try connection.readLine(timeout: 10), as: UTF8.self)
    }

    @Test("a signal reaches the object's observers (any key path, patterns, compact), before the reply, with no revision and nothing stored")
    func observersHearASignal() throws {
        let server = try KVODProcess()
        let writer = try server.connect()
        try writer.call("create", ["object": "room", "values": ["topic": "kvo", "n": 1]])
        let full = try server.connect()
        let sub = try full.call("observe", ["object": "room", "keyPath": "topic", "options": ["new", "old"]])["sub"]
        let compact = try server.connect()
        try compact.call("hello", ["events": "compact"])
        let compactSub = try compact.call("observe", ["object": "room", "keyPath": "n", "options": ["old"]])["sub"]
        let pattern = try server.connect()
        let patternSub = try pattern.call("observe", ["pattern": "ro*", "keyPath": "n"])["sub"]
        let revision = try writer.call("get", ["object": "room"])["rev"]
        // The writer observes too: its own event comes before its reply, as a write's does.
        let own = try writer.call("observe", ["object": "room", "keyPath": "n"])["sub"]
        try writer.send(["op": "signal", "id": 9, "object": "room", "value": ["x": 3, "y": [4, "é"]]])
        let first = try writer.readMessage()
        #expect(first["event"] == "change" && first["sub"] == own, "\(first)")
        #expect(try writer.readMessage() == ["id": 9, "ok": true])
        // Byte for byte: no key path, no old (though asked), the payload as new, the revision current.
        let line = try nextLine(full)
        let rev = revision?.intValue ?? -1
        #expect(line == #"{"event":"change","sub":\#(sub?.intValue ?? -1),"object":"room","reason":"signal","rev":\#(rev),"change":{"kind":1,"new":{"x":3,"y":[4,"é"]}}}"#)
        #expect(try nextLine(compact) == #"{"s":\#(compactSub?.intValue ?? -1),"r":\#(rev),"t":"room","w":"g","n":{"x":3,"y":[4,"é"]}}"#)
        let heard = try pattern.nextEvent()
        #expect(heard?["sub"] == patternSub && heard?["reason"] == "signal" && heard?["object"] == "room"
                && heard?["change"]?["new"]?["x"] == 3 && heard?["keyPath"] == nil, "\(String(describing: heard))")
        // Nothing stored, no revision taken, no history: a resume from before hears no signal.
        let after = try writer.call("get", ["object": "room"])
        #expect(after["rev"] == revision && after["value"] == ["topic": "kvo", "n": 1])
        let resumed = try server.connect()
        try resumed.call("observe", ["object": "room", "keyPath": "topic", "sinceRev": 0])
        try writer.call("set", ["object": "room", "keyPath": "topic", "value": "swift"])
        let replayed = try events(resumed, within: 0.5)
        #expect(!replayed.contains { $0["reason"] == "signal" } && replayed.contains { $0["change"]?["new"] == "swift" }, "\(replayed)")
        // Observers of other objects hear nothing.
        try writer.call("create", ["object": "other"])
        let bystander = try server.connect()
        try bystander.call("observe", ["object": "other", "keyPath": "n"])
        try writer.call("signal", ["object": "room", "value": 1])
        #expect(try events(bystander, within: 0.3).isEmpty)
    }

    @Test("hostile signals are refused with nothing sent: unknown objects, huge and deep payloads, strict fields, floods")
    func hostileSignals() throws {
        let server = try KVODProcess()
        let sender = try server.connect()
        try sender.call("create", ["object": "room"])
        let observer = try server.connect()
        try observer.call("observe", ["object": "room", "keyPath": "n"])
        try observer.call("observe", ["pattern": "ghost*"])
        func code(_ reply: JSONValue) -> String? { reply["error"]?["code"]?.stringValue }
        // An object that does not exist: not_found (a pattern observer of its id hears nothing).
        #expect(code(try sender.request("signal", ["object": "ghost", "value": 1])) == "not_found")
        // Over 64 KiB of payload, and deeper than a stored value may be.
        let big = String(repeating: "x", count: 70_000)
        let tooBig = try sender.request("signal", ["object": "room", "value": .string(big)])
        #expect(code(tooBig) == "too_large" && tooBig["error"]?["limit"] == 65_536, "\(tooBig)")
        var deep: JSONValue = 1
        for _ in 0..<140 { deep = .array([deep]) }
        let tooDeep = try sender.request("signal", ["object": "room", "value": deep])
        #expect(code(tooDeep) == "too_large" && tooDeep["error"]?["limit"] == 128, "\(tooDeep)")
        // Deeper than the parser's 256 levels: the line is refused as it is read.
        let nested = String(repeating: "[", count: 300) + String(repeating: "]", count: 300)
        try sender.send(raw: Array(#"{"op":"signal","id":1,"object":"room","value":\#(nested)}"#.utf8) + [10])
        #expect(code(try sender.readMessage()) == "bad_request")
        // Strict fields: a key path, a ttl or a missing value are bad_request.
        #expect(code(try sender.request("signal", ["object": "room", "keyPath": "a", "value": 1])) == "bad_request")
        #expect(code(try sender.request("signal", ["object": "room", "value": 1, "ttl": 5])) == "bad_request")
        #expect(code(try sender.request("signal", ["object": "room"])) == "bad_request")
        #expect(try events(observer, within: 0.3).isEmpty, "nothing refused was sent")
        // A flood: 300 pipelined in one write. The first 100 go (the burst), then 100 a second: the rest are
        // rate_limited with retryAfter, and the connection keeps serving.
        let started = Date()
        var lines: [UInt8] = []
        for index in 0..<300 { lines += Array(#"{"op":"signal","id":\#(index),"object":"room","value":\#(index)}"#.utf8) + [10] }
        try sender.send(raw: lines)
        var sent = 0
        var limited = 0
        for _ in 0..<300 {
            let reply = try sender.readMessage()
            if reply["ok"] == true { sent += 1 } else {
                #expect(code(reply) == "rate_limited" && reply["error"]?["limit"] == 100
                        && (reply["error"]?["retryAfter"]?.intValue ?? 0) >= 1, "\(reply)")
                limited += 1
            }
        }
        let seconds = Date().timeIntervalSince(started)
        #expect(sent >= 100 && limited >= 1 && Double(sent) <= 101 + 100 * seconds, "\(sent) sent, \(limited) refused in \(seconds) s")
        let heard = try events(observer, within: 0.5).filter { $0["reason"] == "signal" }
        #expect(heard.count == sent, "each signal sent was heard once: \(heard.count) of \(sent)")
        _ = try sender.call("ping")
        // The rate comes back with time.
        usleep(50_000)
        #expect(try sender.request("signal", ["object": "room", "value": "again"])["ok"] == true)
    }

    @Test("write sends a signal, read hears it: a write-only user may send, a user who may not read the object hears nothing")
    func permissions() throws {
        let scratch = try TemporaryDirectory()
        let usersFile = scratch.appending("users.json")
        try KVODUserTool.addUser("root", password: "pw", usersFile: usersFile)
        try KVODUserTool.addUser("writer", password: "pw", rules: ["room=write"], usersFile: usersFile)
        try KVODUserTool.addUser("reader", password: "pw", rules: ["room=read", "lobby=read"], usersFile: usersFile)
        try KVODUserTool.addUser("outsider", password: "pw", rules: ["lobby=read", "ro*=write"], usersFile: usersFile)
        let server = try KVODProcess(["--users", usersFile])
        func login(_ user: String) throws -> KVOConnection {
            let connection = try server.connect()
            try connection.call("auth", ["user": .string(user), "password": "pw"])
            return connection
        }
        let root = try login("root")
        try root.call("create", ["object": "room"])
        try root.call("create", ["object": "lobby"])
        let reader = try login("reader")
        try reader.call("observe", ["object": "room", "keyPath": "n"])
        try reader.call("observe", ["pattern": "*"])
        let outsider = try login("outsider")
        try outsider.call("observe", ["pattern": "*"])
        try outsider.call("observe", ["object": "lobby", "keyPath": "n"])
        // The write-only user sends (it cannot read the room; it may write it).
        let writer = try login("writer")
        #expect(try writer.request("signal", ["object": "room", "value": "hi"])["ok"] == true)
        let heard = try events(reader, within: 0.5)
        #expect(heard.count == 2 && heard.allSatisfy { $0["reason"] == "signal" && $0["change"]?["new"] == "hi" }, "\(heard)")
        // The outsider's pattern matches the room, but it may not read it: nothing.
        #expect(try events(outsider, within: 0.3).isEmpty)
        // Without write: forbidden, before the object's existence is looked at; nothing sent.
        let denied = try reader.request("signal", ["object": "lobby", "value": 1])
        #expect(denied["error"]?["code"] == "forbidden" && denied["error"]?["permission"] == "write", "\(denied)")
        #expect(try reader.request("signal", ["object": "nowhere", "value": 1])["error"]?["code"] == "forbidden")
        #expect(try events(outsider, within: 0.3).isEmpty)
    }
}
