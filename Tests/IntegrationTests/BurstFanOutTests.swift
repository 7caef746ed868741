import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// A pipelined burst fanned out to many subscribers: big enough that the server writes it in
/// several rounds within one loop iteration (`Server.flushEarlyIfOutputIsLarge`, every 4 MiB of
/// events) and spreads each connection's output over many output chunks. Nothing may be lost,
/// duplicated or reordered, and replies keep request order.
@Suite struct BurstFanOutTests {
    @Test func aLargePipelinedBurstReachesEverySubscriberCompleteAndInOrder() throws {
        let server = try KVODProcess()
        let writer = try server.connect()
        try writer.call("create", ["object": "burst", "values": ["v": 0]])
        let subscribers = try (0..<20).map { _ in try server.connect() }
        for subscriber in subscribers {
            try subscriber.call("observe", ["object": "burst", "keyPath": "v", "options": ["new"]])
        }
        // 1,500 sets of 2 KiB values in one send: about 63 MB of events, 3 MB per subscriber.
        let padding = String(repeating: "b", count: 2_048)
        let sets = 1_500
        var burst: [UInt8] = []
        for index in 1...sets {
            burst += JSONWriter.bytes(["op": "set", "id": .int(Int64(index)), "object": "burst", "keyPath": "v",
                                       "value": .string("\(index)-\(padding)")]) + [0x0A]
        }
        try writer.send(raw: burst)
        for index in 1...sets {
            let reply = try writer.readMessage()
            #expect(reply["id"] == .int(Int64(index)) && reply["ok"] == true, "reply \(index): \(reply)")
            if reply["id"] != .int(Int64(index)) { break }
        }
        for (number, subscriber) in subscribers.enumerated() {
            var lastRev: Int64 = 0
            for index in 1...sets {
                let event = try #require(try subscriber.nextEvent(timeout: 10), "subscriber \(number) event \(index)")
                let rev = event["rev"]?.intValue ?? 0
                let inOrder = event["change"]?["new"] == .string("\(index)-\(padding)") && rev > lastRev
                #expect(inOrder, "subscriber \(number), event \(index): rev \(rev) after \(lastRev)")
                if !inOrder { break }
                lastRev = rev
            }
            expectEqual(try subscriber.call("ping")["ok"], true)
            #expect(subscriber.pendingEvents.isEmpty, "no duplicate arrived after the last event")
        }
    }
}
