import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// The wire protocol against the real kvod binary over real TCP: every op, every error code, every
/// option, ordering and cleanup. Each test starts its own kvod on an ephemeral port.
@Suite struct ServerProtocolTests {
    private func errorCode(_ reply: JSONValue) -> String? {
        reply["error"]?["code"]?.stringValue
    }

    // MARK: - Operations

    @Test func helloReportsServerAndProtocol() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        let reply = try client.call("hello", ["client": "tests"])
        expectEqual(reply["server"], "kvod")
        expectEqual(reply["protocol"], 1)
        expectEqual(reply["version"]?.stringValue?.isEmpty, false)
        #expect(reply["connection"]?.intValue != nil)
    }

    @Test func createGetSetDeleteListAndErrors() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        expectEqual(try client.call("create", ["object": "person", "values": ["name": "Ada", "address": ["city": "London"]]])["rev"], 1)
        expectEqual(errorCode(try client.request("create", ["object": "person", "values": [:]])), "exists")
        expectEqual(try client.call("get", ["object": "person"])["value"], ["name": "Ada", "address": ["city": "London"]])
        expectEqual(try client.call("get", ["object": "person", "keyPath": "address.city"])["value"], "London")
        expectEqual(try client.call("get", ["object": "person", "keyPath": "nickname"])["value"], .null)
        expectEqual(try client.call("set", ["object": "person", "keyPath": "address.city", "value": "Paris"])["rev"], 2)
        expectEqual(try client.call("get", ["object": "person", "keyPath": "address.city"])["value"], "Paris")
        expectEqual(errorCode(try client.request("get", ["object": "person", "keyPath": "name.first"])), "type_mismatch")
        expectEqual(errorCode(try client.request("set", ["object": "person", "keyPath": "name.first", "value": 1])), "type_mismatch")
        expectEqual(errorCode(try client.request("set", ["object": "person", "keyPath": "job.title", "value": 1])), "not_found")
        expectEqual(errorCode(try client.request("get", ["object": "nobody"])), "not_found")
        expectEqual(errorCode(try client.request("set", ["object": "nobody", "keyPath": "a", "value": 1])), "not_found")
        expectEqual(errorCode(try client.request("observe", ["object": "nobody", "keyPath": "a"])), "not_found")
        expectEqual(errorCode(try client.request("info", ["object": "nobody"])), "not_found")
        expectEqual(errorCode(try client.request("delete", ["object": "nobody"])), "not_found")
        expectEqual(try client.call("create", ["object": "another"])["rev"], 3, "values are optional; errors did not advance rev")
        expectEqual(try client.call("list")["objects"], ["another", "person"])
        expectEqual(try client.call("delete", ["object": "person"])["rev"], 4)
        expectEqual(try client.call("list")["objects"], ["another"])
        expectEqual(try client.call("get", ["object": "another"])["value"], [:])
        try client.call("ping")
    }

    @Test func revisionGrowsByOneForEveryAcceptedWriteIncludingNoOps() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        var expected: Int64 = 0
        try client.call("create", ["object": "o", "values": ["v": 1]]); expected += 1
        for value: JSONValue in [1, 1, 2, 2, "x"] {
            expected += 1
            expectEqual(try client.call("set", ["object": "o", "keyPath": "v", "value": value])["rev"], .int(expected))
        }
        _ = try client.request("set", ["object": "o", "keyPath": "v.w", "value": 1])  // refused
        expectEqual(try client.call("get", ["object": "o"])["rev"], .int(expected))
    }

    @Test func unknownOpAndIDEcho() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        try client.send(raw: Array(#"{"op":"frobnicate","id":"abc"}"#.utf8) + [0x0A])
        let reply = try client.readMessage()
        expectEqual(reply["id"], "abc")
        expectEqual(errorCode(reply), "unknown_op")
        for id: JSONValue in [7, 2.5, true, .null, "x y"] {
            try client.send(.object(["op": "ping", "id": id]))
            let echoed = try client.readMessage()
            expectEqual(echoed["id"], id)
            expectEqual(echoed["ok"], true)
        }
        try client.send(.object(["op": "ping"]))
        let anonymous = try client.readMessage()
        expectEqual(anonymous["ok"], true)
        expectEqual(anonymous["id"], nil, "a request without id gets a reply without id")
    }

    // MARK: - Observing

    @Test func everyOptionCombinationShapesTheChangeDictionary() throws {
        let server = try KVODProcess()
        let writer = try server.connect()
        try writer.call("create", ["object": "clock", "values": ["date": "2026-11-20"]])
        let names = ["new", "old", "initial", "prior"]
        for mask in 0..<16 {
            let options = names.enumerated().filter { mask & (1 << $0.offset) != 0 }.map(\.element)
            let observer = try server.connect()
            let before = try writer.call("get", ["object": "clock", "keyPath": "date"])["value"]!
            let sub = try observer.call("observe", ["object": "clock", "keyPath": "date",
                                                    "options": .array(options.map(JSONValue.string))])["sub"]!
            var expectedEvents: [(reason: String, change: [String: JSONValue])] = []
            if options.contains("initial") {
                var change: [String: JSONValue] = ["kind": 1]
                if options.contains("new") { change["new"] = before }
                expectedEvents.append(("initial", change))
            }
            let after = JSONValue.string("2026-11-\(30 - mask)")
            let rev = try writer.call("set", ["object": "clock", "keyPath": "date", "value": after])["rev"]!
            if options.contains("prior") {
                var change: [String: JSONValue] = ["kind": 1, "notificationIsPrior": true]
                if options.contains("old") { change["old"] = before }
                expectedEvents.append(("valueChanged", change))
            }
            var change: [String: JSONValue] = ["kind": 1]
            if options.contains("new") { change["new"] = after }
            if options.contains("old") { change["old"] = before }
            expectedEvents.append(("valueChanged", change))

            for expected in expectedEvents {
                let event = try #require(try observer.nextEvent(timeout: 5), "options \(options): missing \(expected)")
                expectEqual(event["event"], "change")
                expectEqual(event["sub"], sub)
                expectEqual(event["object"], "clock")
                expectEqual(event["keyPath"], "date")
                expectEqual(event["reason"], .string(expected.reason), "options \(options)")
                expectEqual(event["change"], .object(expected.change), "options \(options)")
                if expected.reason != "initial" { #expect(event["rev"] == rev) }
            }
            try observer.call("ping")
            #expect(observer.pendingEvents.isEmpty, "options \(options): unexpected \(observer.pendingEvents)")
        }
    }

    @Test func omittedOptionsMeanNewOnly() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        try client.call("create", ["object": "o", "values": ["v": 1]])
        try client.call("observe", ["object": "o", "keyPath": "v"])
        try client.call("set", ["object": "o", "keyPath": "v", "value": 2])
        let event = try #require(try client.nextEvent(timeout: 5))
        expectEqual(event["change"], ["kind": 1, "new": 2])
    }

    @Test func initialArrivesRightAfterTheObserveReply() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        try client.call("create", ["object": "o", "values": ["v": "now"]])
        // Pipeline observe and a ping; the initial event must sit between their replies.
        try client.send(.object(["op": "observe", "id": 1, "object": "o", "keyPath": "v", "options": ["initial", "new"]]))
        try client.send(.object(["op": "ping", "id": 2]))
        let first = try client.readMessage()
        let second = try client.readMessage()
        let third = try client.readMessage()
        #expect(first["id"] == 1 && first["ok"] == true)
        expectEqual(second["reason"], "initial")
        expectEqual(second["change"], ["kind": 1, "new": "now"])
        expectEqual(second["rev"], 1)
        expectEqual(third["id"], 2)
    }

    @Test func eventsReachTheWritersOwnConnectionBeforeItsReply() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        try client.call("create", ["object": "o", "values": ["v": 0]])
        try client.call("observe", ["object": "o", "keyPath": "v", "options": ["new", "prior"]])
        try client.send(.object(["op": "set", "id": "w", "object": "o", "keyPath": "v", "value": 1]))
        let prior = try client.readMessage()
        let change = try client.readMessage()
        let reply = try client.readMessage()
        expectEqual(prior["change"]?["notificationIsPrior"], true)
        expectEqual(change["change"], ["kind": 1, "new": 1])
        expectEqual(reply["id"], "w")
        expectEqual(reply["rev"], change["rev"])
        expectEqual(prior["rev"], change["rev"])
        // Same for delete: sourceDeleted precedes the delete's reply.
        try client.send(.object(["op": "delete", "id": "d", "object": "o"]))
        let priorDelete = try client.readMessage()
        let deleted = try client.readMessage()
        let deleteReply = try client.readMessage()
        #expect(priorDelete["reason"] == "sourceDeleted" && priorDelete["change"]?["notificationIsPrior"] == true)
        expectEqual(deleted["reason"], "sourceDeleted")
        expectEqual(deleted["change"], ["kind": 1, "new": .null])
        expectEqual(deleteReply["id"], "d")
    }

    @Test func nestedKeyPathsNotifyAncestorsAndDescendantsButNotSiblings() throws {
        let server = try KVODProcess()
        let writer = try server.connect()
        let observer = try server.connect()
        try writer.call("create", ["object": "p", "values": ["a": ["b": 1, "c": 1]]])
        let onA = try observer.call("observe", ["object": "p", "keyPath": "a", "options": ["new", "old"]])["sub"]!
        let onAB = try observer.call("observe", ["object": "p", "keyPath": "a.b", "options": ["new", "old"]])["sub"]!
        let onAC = try observer.call("observe", ["object": "p", "keyPath": "a.c", "options": ["new", "old"]])["sub"]!

        try writer.call("set", ["object": "p", "keyPath": "a.b", "value": 2])
        var events = [try #require(try observer.nextEvent(timeout: 5)), try #require(try observer.nextEvent(timeout: 5))]
        expectEqual(Set(events.compactMap { $0["sub"]?.intValue }), Set([onA, onAB].compactMap(\.intValue)))
        let aEvent = try #require(events.first { $0["sub"] == onA })
        expectEqual(aEvent["change"], ["kind": 1, "old": ["b": 1, "c": 1], "new": ["b": 2, "c": 1]])

        // Replace a: a.b differs (2 -> 3) and notifies; a.c is equal (1 == 1) and does not.
        try writer.call("set", ["object": "p", "keyPath": "a", "value": ["b": 3, "c": 1]])
        events = [try #require(try observer.nextEvent(timeout: 5)), try #require(try observer.nextEvent(timeout: 5))]
        expectEqual(Set(events.compactMap { $0["sub"]?.intValue }), Set([onA, onAB].compactMap(\.intValue)))
        expectEqual(events.first { $0["sub"] == onAB }?["change"], ["kind": 1, "old": 2, "new": 3])
        try observer.call("ping")
        #expect(!observer.pendingEvents.contains { $0["sub"] == onAC })
        #expect(observer.pendingEvents.isEmpty)
    }

    @Test func noEventWhenTheValueIsUnchanged() throws {
        let server = try KVODProcess()
        let writer = try server.connect()
        let observer = try server.connect()
        try writer.call("create", ["object": "o", "values": ["v": 1]])
        try observer.call("observe", ["object": "o", "keyPath": "v", "options": ["new", "old", "prior"]])
        try writer.call("set", ["object": "o", "keyPath": "v", "value": 1])
        try writer.call("set", ["object": "o", "keyPath": "v", "value": 1.0])
        try writer.call("set", ["object": "o", "keyPath": "v", "value": 2])
        let prior = try #require(try observer.nextEvent(timeout: 5))
        let change = try #require(try observer.nextEvent(timeout: 5))
        expectEqual(prior["change"]?["notificationIsPrior"], true)
        expectEqual(change["change"], ["kind": 1, "new": 2, "old": 1])
        expectEqual(change["rev"], 4, "the two no-op sets advanced rev without notifying")
    }

    @Test func deleteSendsSourceDeletedAndEndsTheSubscription() throws {
        let server = try KVODProcess()
        let writer = try server.connect()
        let observer = try server.connect()
        try writer.call("create", ["object": "o", "values": ["v": "last"]])
        let sub = try observer.call("observe", ["object": "o", "keyPath": "v", "options": ["new", "old"]])["sub"]!
        let rev = try writer.call("delete", ["object": "o"])["rev"]!
        let event = try #require(try observer.nextEvent(timeout: 5))
        expectEqual(event["reason"], "sourceDeleted")
        expectEqual(event["rev"], rev)
        expectEqual(event["change"], ["kind": 1, "new": .null, "old": "last"])
        expectEqual(try observer.call("unobserve", ["sub": sub])["removed"], false, "the sub no longer exists")
        // Re-creating the object does not revive the old observation.
        try writer.call("create", ["object": "o", "values": ["v": 1]])
        try writer.call("set", ["object": "o", "keyPath": "v", "value": 2])
        expectEqual(try observer.nextEvent(timeout: 0.3), nil)
        expectEqual(try writer.call("info", ["object": "o"])["observers"], [])
    }

    @Test func unobserveTwiceAndAnotherConnectionsSub() throws {
        let server = try KVODProcess()
        let owner = try server.connect()
        let stranger = try server.connect()
        try owner.call("create", ["object": "o", "values": ["v": 1]])
        let sub = try owner.call("observe", ["object": "o", "keyPath": "v"])["sub"]!
        expectEqual(try stranger.call("unobserve", ["sub": sub])["removed"], false)
        expectEqual(try stranger.call("unobserve", ["sub": 424242])["removed"], false)
        expectEqual(try owner.call("info", ["object": "o"])["observers"]?.arrayValue?.count, 1)
        expectEqual(try owner.call("unobserve", ["sub": sub])["removed"], true)
        expectEqual(try owner.call("unobserve", ["sub": sub])["removed"], false)
        try stranger.call("set", ["object": "o", "keyPath": "v", "value": 2])
        expectEqual(try owner.nextEvent(timeout: 0.3), nil)
    }

    @Test func infoShowsObserversAndDisconnectRemovesThemAtOnce() throws {
        let server = try KVODProcess()
        let watcher = try server.connect()
        let inspector = try server.connect()
        try inspector.call("create", ["object": "o", "values": ["v": 1]])
        let watcherID = try watcher.call("hello")["connection"]!
        let first = try watcher.call("observe", ["object": "o", "keyPath": "v", "options": ["old", "new"]])["sub"]!
        let second = try watcher.call("observe", ["object": "o", "keyPath": "w.x", "options": ["prior"]])["sub"]!
        let info = try inspector.call("info", ["object": "o"])["observers"]
        #expect(info == [
            ["sub": first, "keyPath": "v", "options": ["new", "old"], "connection": watcherID],
            ["sub": second, "keyPath": "w.x", "options": ["prior"], "connection": watcherID],
        ])
        watcher.close()
        // The server notices the close on its next loop iteration.
        #expect(try waitForObservers(inspector, object: "o", count: 0, timeout: 5).isEmpty)
        try inspector.call("set", ["object": "o", "keyPath": "v", "value": 2])
    }

    @Test func subscriptionIDsAreUniqueAcrossConnections() throws {
        let server = try KVODProcess()
        let setup = try server.connect()
        try setup.call("create", ["object": "o"])
        var seen = Set<Int64>()
        for _ in 0..<5 {
            let client = try server.connect()
            for keyPath in ["a", "b", "a"] {
                let sub = try #require(try client.call("observe", ["object": "o", "keyPath": .string(keyPath)])["sub"]?.intValue)
                #expect(seen.insert(sub).inserted)
            }
        }
    }

    @Test func manyObserversOfOneKeyPathAllHearEachChangeOnce() throws {
        let server = try KVODProcess()
        let writer = try server.connect()
        try writer.call("create", ["object": "o", "values": ["v": 0]])
        let observers = try (0..<20).map { _ in try server.connect() }
        var subs: [Int64] = []
        for observer in observers {
            subs.append(try #require(try observer.call("observe", ["object": "o", "keyPath": "v"])["sub"]?.intValue))
        }
        for value in 1...10 { try writer.call("set", ["object": "o", "keyPath": "v", "value": .int(Int64(value))]) }
        for (observer, sub) in zip(observers, subs) {
            for value in 1...10 {
                let event = try #require(try observer.nextEvent(timeout: 5))
                expectEqual(event["sub"], .int(sub))
                expectEqual(event["change"]?["new"], .int(Int64(value)), "in order, once each")
            }
        }
    }
}
